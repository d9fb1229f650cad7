package queueing

import (
	"context"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// TestBracketHiRatio logs the distribution of hi / evaluator p99 over the property
// test's generator where the bracket is certain (a measurement of the bound's
// looseness, not an assertion beyond hi ≥ p99, which the property test owns).
func TestBracketHiRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	var ratios []float64
	byBackend := map[string][]float64{}
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		q, err := Quantitative(context.Background(), w, e, tm)
		if err != nil || q.Unstable {
			return
		}
		s, err := Screening(w, e, tm)
		if err != nil || s.Unstable || !s.Diagnostics.BracketCertain {
			return
		}
		r := s.TTFTSteadyP99Hi / q.TTFTSteady.Quantile(0.99)
		ratios = append(ratios, r)
		byBackend[e.Backend] = append(byBackend[e.Backend], r)
	})
	logRatios(t, "all", ratios)
	for _, b := range []string{BackendVLLM, BackendTRTLLM, BackendSGLang} {
		logRatios(t, b, byBackend[b])
	}
}

func logRatios(t *testing.T, name string, r []float64) {
	if len(r) == 0 {
		return
	}
	sort.Float64s(r)
	q := func(p float64) float64 { return r[min(len(r)-1, int(p*float64(len(r))))] }
	t.Logf("%-7s n=%5d hi/p99 median %.3f p90 %.3f p99 %.3f max %.3f", name, len(r), q(0.5), q(0.9), q(0.99), r[len(r)-1])
}
