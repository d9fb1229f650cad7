package disagg

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestPricingErrorIsTheTandemsError: a decode pass the decode pool's timing cannot
// price (more than 2 rows here) is both tiers' error, wrapping the timing's.
func TestPricingErrorIsTheTandemsError(t *testing.T) {
	gap := errors.New("no rows near this shape")
	c := testConfig(t, 1, 1)
	dec := c.Decode.Timing
	c.Decode.Timing = timing.Func(func(p *timing.Pass) (float64, error) {
		if len(p.Decode) > 2 {
			return 0, gap
		}
		return dec.PassMs(p)
	})
	w := workload.Spec{ISL: 1000, OSL: 10, Concurrency: 4}
	_, err := Quantitative(context.Background(), w, c, Options{})
	if !errors.Is(err, gap) || !strings.Contains(err.Error(), "decode rows): no rows near this shape") {
		t.Errorf("quantitative: err %v, want the timing's error naming the pass", err)
	}
	_, err = Screening(w, c)
	if !errors.Is(err, gap) || !strings.Contains(err.Error(), "disagg screening: pricing the decode pass of") {
		t.Errorf("screening: err %v, want the timing's error naming the pass", err)
	}
}
