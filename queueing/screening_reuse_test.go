package queueing

import (
	"encoding/json"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestScreenerEqualsScreening: a reused Screener gives bit-identical reports to fresh
// Screening calls, whatever it screened before.
func TestScreenerEqualsScreening(t *testing.T) {
	var s Screener
	lin := timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 1e-4}
	for _, backend := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		e, err := engine.Defaults(backend, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []workload.Spec{
			{ISL: 4096, OSL: 256, Concurrency: 32},
			{ISL: 512, OSL: 1, Concurrency: 1},
			{ISL: 20000, OSL: 64, Prefix: 1024, Concurrency: 200},
			{ISL: 1024, OSL: 128, RateRPS: 2},
		} {
			want, err1 := Screening(w, e, lin)
			got, err2 := s.Screen(w, e, lin)
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("%s %+v: errors differ: %v vs %v", backend, w, err1, err2)
			}
			if err1 != nil {
				continue
			}
			a, _ := json.Marshal(want.Columns(1))
			b, _ := json.Marshal(got.Columns(1))
			if string(a) != string(b) {
				t.Fatalf("%s %+v: Screener differs from Screening:\n%s\n%s", backend, w, b, a)
			}
		}
	}
}
