package oracle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
)

// TestOpenRunRefusesWhatItWouldIgnore: the DES runs one arrival path and draws
// lengths from its Shape, so an open run pooling paths or stating its own
// shapes is refused in one line instead of being run as something else.
func TestOpenRunRefusesWhatItWouldIgnore(t *testing.T) {
	e, err := engine.Defaults(engine.VLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	e.BlockSize, e.KVCapacityTokens = 16, 65536
	s, err := oracle.New(e, timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.04}, oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		run  queueing.FiniteRun
		want string
	}{
		{queueing.FiniteRun{Requests: 8, Open: true, RateRPS: 2, Paths: 2}, "open run paths = 2: the DES runs one path"},
		{queueing.FiniteRun{Requests: 8, Open: true, RateRPS: 2, Shapes: "100,200;8,16"}, `open run shapes "100,200;8,16": the DES draws lengths from its Shape`},
	} {
		_, err := s.RunOpenRun(context.Background(), oracle.OpenRun{Shape: oracle.Shape{ISL: 256, OSL: 16}, Run: c.run})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want %q", c.run.Label(), err, c.want)
		}
	}
}
