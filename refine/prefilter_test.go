package refine

import (
	"context"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/store"
)

// TestUndecidedSQLIsSuperset checks that the SQL prefilter of the query pre-pass
// keeps every row the exact Go check (undecided) selects, for random rows
// (brackets, certainty, values) and random thresholds with every operator.
func TestUndecidedSQLIsSuperset(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		var pts []store.Point
		m := rapid.IntRange(1, 20).Draw(rt, "m")
		for i := 0; i < m; i++ {
			in := store.PointInputs{Model: "m", System: "s", Backend: "vllm", Version: "1", Mode: store.ModeAgg,
				ISL: 100 + n, OSL: 10, TP: 1, PP: 1, DP: 1, MoETP: 1, MoEEP: 1, Batch: i + 1, CtxTokens: 100,
				DatabaseMode: "SILICON", Evaluator: "prefilter"}
			val := func(name string) float64 { return float64(rapid.IntRange(0, 20).Draw(rt, name)) }
			q := store.Queueing{Valid: true, Tier: store.TierScreening, Fidelity: "W0"}
			for j := range q.V {
				q.V[j] = val("v")
			}
			if rapid.Bool().Draw(rt, "bracket") {
				lo, hi := val("lo"), val("hi")
				if lo > hi {
					lo, hi = hi, lo
				}
				q.HasBracket, q.P99Lo, q.P99Hi, q.HiCertain = true, lo, hi, rapid.Bool().Draw(rt, "certain")
			}
			l := store.Legacy{Concurrency: 1, TTFT: 1, TPOT: 1, RequestLatency: 1, TokensPerSPerGPU: val("y"), TokensPerSPerUser: val("x")}
			pts = append(pts, store.NewPoint(in, l, q))
		}
		if _, err := s.InsertPoints(ctx, pts); err != nil {
			rt.Fatal(err)
		}
		th := Threshold{
			Column: rapid.SampledFrom([]string{"ttft_steady_p99", "ttft_steady_p50", "ttft_steady_p999", "ttft_steady_mean", "itl_p99", "e2e_p50"}).Draw(rt, "col"),
			Op:     rapid.SampledFrom([]Op{LT, LE, GT, GE}).Draw(rt, "op"),
			Value:  float64(rapid.IntRange(0, 20).Draw(rt, "t")),
		}
		c, a := th.undecidedSQL()
		got, err := s.SelectPoints(ctx, store.PointFilter{ISL: 100 + n, Tier: store.TierScreening, Where: c, WhereArgs: a})
		if err != nil {
			rt.Fatal(err)
		}
		kept := map[string]bool{}
		for _, p := range got {
			kept[p.Key] = true
		}
		all, _ := s.SelectPoints(ctx, store.PointFilter{ISL: 100 + n})
		for i := range all {
			if undecided(&all[i], th) && !kept[all[i].Key] {
				rt.Fatalf("%v: row %s undecided but dropped by the SQL prefilter (q %+v)", th, all[i].Key[:8], all[i].Q)
			}
		}
	})
}
