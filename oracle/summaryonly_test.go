package oracle_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing/timing"
)

// TestSummaryOnlySameRun: over random engines and workloads (KV pressure, prefix
// sharing, EOS), Options.SummaryOnly changes nothing but what is kept: the same
// Summary bit for bit and the same per-request TTFT, finish, tokens, preemptions and
// cached tokens.
func TestSummaryOnlySameRun(t *testing.T) {
	tm := timing.Linear{BaseMs: 1, PrefillMsPerToken: 0.1, DecodeMsPerRow: 0.3, CtxMsPerToken: 0.01}
	for seed := range uint64(300) {
		e, reqs := randomCase(rand.New(rand.NewPCG(seed, 7)))
		run := func(lean bool) (*oracle.Result, oracle.Summary, error) {
			s, err := oracle.New(e, tm, oracle.Options{SummaryOnly: lean})
			if err != nil {
				return nil, oracle.Summary{}, err
			}
			for _, r := range reqs {
				if _, err := s.Add(r); err != nil {
					return nil, oracle.Summary{}, err
				}
			}
			res, err := s.Run(context.Background())
			if err != nil {
				return nil, oracle.Summary{}, err
			}
			sum, err := res.Summary()
			return res, sum, err
		}
		full, fs, err1 := run(false)
		lean, ls, err2 := run(true)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("seed %d: errors differ: %v / %v", seed, err1, err2)
		}
		if err1 != nil {
			continue
		}
		if fs != ls {
			t.Fatalf("seed %d: summary\n%+v\nSummaryOnly\n%+v", seed, fs, ls)
		}
		for i, a := range full.Requests {
			b := lean.Requests[i]
			if b.TokenTimesMs != nil || a.TTFTMs != b.TTFTMs || a.FinishMs != b.FinishMs || a.NumTokens != len(a.TokenTimesMs) ||
				a.NumTokens != b.NumTokens || a.NumPreemptions != b.NumPreemptions || a.NumCachedTokens != b.NumCachedTokens ||
				(a.NumTokens > 0 && a.FirstTokenMs != a.TokenTimesMs[0]) || a.FirstTokenMs != b.FirstTokenMs {
				t.Fatalf("seed %d request %d: %+v vs SummaryOnly %+v", seed, i, a, b)
			}
		}
	}
}

// TestSummaryOnlyScenario: `oracle run`'s summary (SummaryOnly, the gaps counted
// in runs of equal values as the tokens come) is bit for bit the summary of the
// full run (every token time kept) on the benchmark's Poisson scenario, vLLM and
// SGLang: thousands of decode rows share each pass's gap.
func TestSummaryOnlyScenario(t *testing.T) {
	for _, doc := range [][]byte{poissonScenario(1500), sglangPoissonScenario(1500, true)} {
		var sums [2]oracle.Summary
		for i, lean := range []bool{false, true} {
			sc, err := oracle.ReadScenario(bytes.NewReader(doc))
			if err != nil {
				t.Fatal(err)
			}
			res, err := sc.Simulate(context.Background(), oracle.Options{SummaryOnly: lean})
			if err != nil {
				t.Fatal(err)
			}
			if sums[i], err = res.Summary(); err != nil {
				t.Fatal(err)
			}
		}
		if sums[0] != sums[1] || sums[0].OutputTokens != 1500*256 {
			t.Fatalf("full run\n%+v\nSummaryOnly\n%+v", sums[0], sums[1])
		}
	}
}
