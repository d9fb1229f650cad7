package queueing

import (
	"context"
	"testing"

	"pgregory.net/rapid"
)

// TestBracketHiShortOutputs: the property generator with outputs of 1–3 tokens
// (prefill-bound loops, where the backlog ahead of a request is largest): a
// certain hi is ≥ the evaluator's steady p99.
func TestBracketHiShortOutputs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		if w.Concurrency == 0 {
			return
		}
		w.OSL = rapid.IntRange(1, 3).Draw(rt, "shortOSL")
		w.OSLQuantiles = nil
		if len(w.ISLQuantiles) > 0 {
			w.OSLQuantiles = []int{1, w.OSL, w.OSL + 1}
		}
		q, err := Quantitative(context.Background(), w, e, tm)
		if err != nil || q.Unstable {
			return
		}
		s, err := Screening(w, e, tm)
		if err != nil || !s.Diagnostics.BracketCertain {
			return
		}
		if p99 := q.TTFTSteady.Quantile(0.99); s.TTFTSteadyP99Hi < p99*(1-1e-9) {
			rt.Fatalf("certain hi %v < evaluator p99 %v\nworkload %+v\nengine %+v", s.TTFTSteadyP99Hi, p99, w, e)
		}
	})
}
