package refine

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

func TestSLABuild(t *testing.T) {
	s, err := SLAInput{TTFT: 200, TTFTPct: "p99", TPOT: 30}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !s.PercentileMode || len(s.Constraints) != 2 || s.Constraints[0].Column != "ttft_steady_p99" ||
		s.Constraints[1].Column != "tpot_p50" || s.Constraints[0].Label() != "TTFT(P99)" {
		t.Fatalf("percentile SLA: %+v", s)
	}
	s, _ = SLAInput{TTFT: 200, TPOT: 30}.Build()
	if s.PercentileMode || s.Constraints[0].Column != "ttft" || s.Constraints[1].Label() != "TPOT(avg)" {
		t.Fatalf("legacy SLA: %+v", s)
	}
	s, _ = SLAInput{ITL: 40}.Build()
	if !s.PercentileMode || s.Constraints[0].Column != "itl_p99" {
		t.Fatalf("an ITL target switches to percentile mode with p99: %+v", s)
	}
	for _, c := range []struct {
		in   SLAInput
		want string
	}{
		{SLAInput{TTFT: 200, TTFTPct: "p98"}, `unknown percentile "p98"`},
		{SLAInput{TTFT: -1}, "--ttft -1"},
		{SLAInput{TTFTSet: true}, "--ttft 0"},
		{SLAInput{TTFTPct: "p99"}, "given without --ttft"},
		{SLAInput{TPOT: 30, TPOTPct: "p90"}, "tpot percentile p90 is not stored"},
	} {
		if _, err := c.in.Build(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.in, err, c.want)
		}
	}
}

func TestExtractThresholds(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want string
	}{
		{"select * from pareto where ttft_steady_p99 < 200", "[{ttft_steady_p99 < 200}]"},
		{"select * from pareto where +ttft_steady_p99<=200.5 and itl_p99 < 3e1", "[{ttft_steady_p99 <= 200.5} {itl_p99 < 30}]"},
		{"select * from points p where 200 > p.ttft_steady_p50", "[{ttft_steady_p50 < 200}]"},
		{`select * from pareto where "TTFT_STEADY_P90" between 10 and 20`, "[{ttft_steady_p90 >= 10} {ttft_steady_p90 <= 20}]"},
		{"select * from pareto where model = 'ttft_steady_p99 < 5' -- ttft_steady_p99 < 7\n", "[]"},
		{"select * from pareto where ttft < 200 and tokens_per_s_per_gpu > 100", "[]"},
		{"select * from pareto /* itl_p99 < 1 */ where e2e_p99 >= -1", "[{e2e_p99 >= -1}]"},
	} {
		if got := fmt.Sprint(ExtractThresholds(c.sql)); got != c.want {
			t.Errorf("%q: got %s, want %s", c.sql, got, c.want)
		}
	}
	if !QueryScope("select * from pareto where x") || QueryScope("select * from pareto join points using (key)") {
		t.Error("QueryScope")
	}
}

func FuzzExtractThresholds(f *testing.F) {
	for _, s := range []string{"select * from pareto where ttft_steady_p99 < 200", "'", `"`, "/*", "--", "1 < itl_p99", "x between 1 and"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		for _, th := range ExtractThresholds(sql) {
			if store.QueueingIndex(th.Column) < 0 {
				t.Fatalf("threshold on unknown column %q", th.Column)
			}
			switch th.Op {
			case LT, LE, GT, GE:
			default:
				t.Fatalf("bad op %q", th.Op)
			}
		}
	})
}

// randomSweep sweeps a random small space into a fresh store.
func randomSweep(t *rapid.T, s *store.Store, ev Evaluator, n int) SweepSpec {
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm",
		TotalGPUs: rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus"),
		ISL:       rapid.IntRange(256, 8192).Draw(t, "isl") + n*10000, // a fresh group per case
		OSL:       rapid.IntRange(2, 1024).Draw(t, "osl"),
	}
	spec.Prefix = rapid.IntRange(0, spec.ISL/2).Draw(t, "prefix")
	spec.Batches = rapid.SliceOfNDistinct(rapid.IntRange(1, 256), 1, 12, rapid.ID[int]).Draw(t, "batches")
	if _, err := Sweep(context.Background(), s, ev, spec, SweepOptions{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestFunnelQueryProperties checks, over random sweeps and thresholds, the three
// funnel properties for `select * from <pareto|points> where <col> < T`:
// stage 1 never eliminates a row whose quantitative value meets the target; every
// screening-tier row returned is certain-pass by its bracket; every quantitative row
// returned meets the filter. Truth is the evaluator's quantitative value.
func TestFunnelQueryProperties(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	n, evaluated, returned, topEvaluated, topStraddlers := 0, 0, 0, 0, 0
	defer func() {
		t.Logf("%d cases: %d straddlers resolved, %d rows returned; top-k queries resolved %d of %d straddlers",
			n, evaluated, returned, topEvaluated, topStraddlers)
		if evaluated == 0 || returned == 0 {
			t.Error("the random sweeps never exercised resolution")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		n++
		ev := &counting{Evaluator: Synthetic{}}
		spec := randomSweep(rt, s, ev, n)
		col := rapid.SampledFrom([]string{"ttft_steady_p50", "ttft_steady_p90", "ttft_steady_p99", "ttft_steady_p999", "ttft_steady_mean", "itl_p99"}).Draw(rt, "col")
		rel := rapid.SampledFrom([]string{"pareto", "points"}).Draw(rt, "rel")
		all, err := s.SelectPoints(ctx, store.PointFilter{ISL: spec.ISL, ParetoOnly: rel == "pareto"})
		if err != nil {
			rt.Fatal(err)
		}
		if len(all) == 0 {
			return
		}
		qi := store.QueueingIndex(col)
		// Thresholds around the stored values, so many rows straddle.
		ref := all[rapid.IntRange(0, len(all)-1).Draw(rt, "ref")]
		target := ref.Q.V[qi] * rapid.Float64Range(0.6, 1.6).Draw(rt, "scale")
		truth := map[string]bool{}
		for i := range all {
			q, err := ev.Evaluator.Quantitative(ctx, all[i].PointInputs)
			if err != nil {
				rt.Fatal(err)
			}
			meets := q.V[qi] < target
			truth[all[i].Key] = meets
			if all[i].Q.Tier == store.TierScreening && meets && Classify(&all[i], col, LT, target) == Fail && col != "itl_p99" {
				rt.Fatalf("stage 1 eliminates %s whose quantitative %s %.3f meets %.3f (bracket [%.3f, %.3f])",
					all[i].Key[:8], col, q.V[qi], target, all[i].Q.P99Lo, all[i].Q.P99Hi)
			}
		}
		sql := fmt.Sprintf("select key, queueing_tier, %s, ttft_steady_p99_lo, ttft_steady_p99_hi, bracket_certain from %s where isl = %d and %s < %v", col, rel, spec.ISL, col, target)
		// A top-k query: the truth is the k highest-throughput rows that meet the target.
		limit := rapid.IntRange(0, 4).Draw(rt, "limit")
		meetsAll := truth
		if limit > 0 {
			sql += fmt.Sprintf(" order by tokens_per_s_per_gpu desc, key limit %d", limit)
			var meeting []store.Point
			for _, p := range all { // all is in tokens_per_s_per_gpu desc, key order
				if truth[p.Key] {
					meeting = append(meeting, p)
				}
			}
			top := map[string]bool{}
			for i := 0; i < len(meeting) && i < limit; i++ {
				top[meeting[i].Key] = true
			}
			truth = top
		}
		before := ev.quant.Load()
		qs, err := PrepareQuery(ctx, s, ev, sql, 0, 2)
		if err != nil {
			rt.Fatal(err)
		}
		evaluated += qs.Evaluated
		if limit > 0 {
			topEvaluated += qs.Evaluated
			topStraddlers += qs.Straddlers
		}
		if int(ev.quant.Load()-before) != qs.Evaluated {
			rt.Fatalf("evaluations %d, stats say %d", ev.quant.Load()-before, qs.Evaluated)
		}
		rows, err := storetest.DB(t, s).Queryx(sql)
		if err != nil {
			rt.Fatal(err)
		}
		defer rows.Close()
		got := map[string]bool{}
		for rows.Next() {
			var key, tier string
			var v, lo, hi float64
			var certain int
			if err := rows.Scan(&key, &tier, &v, &lo, &hi, &certain); err != nil {
				rt.Fatal(err)
			}
			got[key] = true
			returned++
			switch tier {
			case store.TierScreening:
				if !(hi < target) || certain != 1 || !strings.HasPrefix(col, "ttft_steady_p") || col == "ttft_steady_p999" {
					rt.Fatalf("screening row %s returned for %s < %v but not certain-pass (bracket [%v, %v])", key[:8], col, target, lo, hi)
				}
			case store.TierQuantitative:
				if !(v < target) {
					rt.Fatalf("quantitative row %s: %s = %v does not meet < %v", key[:8], col, v, target)
				}
			default:
				rt.Fatalf("row %s at tier %s", key[:8], tier)
			}
		}
		// With exact brackets the answer is the truth (ITL has no bracket: rows its
		// screening value eliminates stay eliminated, by design).
		for k, meets := range truth {
			if meets && !got[k] && col != "itl_p99" {
				rt.Fatalf("row %s meets %s < %v quantitatively but is not returned", k[:8], col, target)
			}
			if !meets && got[k] && col != "itl_p99" {
				rt.Fatalf("row %s returned but is not in the true answer (%s < %v, limit %d)", k[:8], col, target, limit)
			}
		}
		for k := range got {
			if !meetsAll[k] {
				rt.Fatalf("row %s returned but its quantitative %s does not meet < %v", k[:8], col, target)
			}
		}
		// A second identical query evaluates nothing more.
		before = ev.quant.Load()
		if _, err := PrepareQuery(ctx, s, ev, sql, 0, 2); err != nil {
			rt.Fatal(err)
		}
		if ev.quant.Load() != before {
			rt.Fatalf("repeated query evaluated %d rows again", ev.quant.Load()-before)
		}
	})
}

// TestBestFunnel checks `best` semantics: with --sla-refine every reported row is
// proven (quantitative or bracket) to meet every percentile constraint, rows come in
// tokens_per_s_per_gpu order with one row per parallel config, and refinement only
// evaluates straddlers it needs.
func TestBestFunnel(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		ev := &counting{Evaluator: Synthetic{}}
		spec := randomSweep(rt, s, ev, n)
		all, _ := s.SelectPoints(ctx, store.PointFilter{ISL: spec.ISL})
		if len(all) == 0 {
			return
		}
		ref := all[rapid.IntRange(0, len(all)-1).Draw(rt, "ref")]
		sla, err := SLAInput{TTFT: ref.Q.V[store.QTTFTSteadyP99] * rapid.Float64Range(0.7, 1.4).Draw(rt, "scale"), TTFTPct: "p99"}.Build()
		if err != nil {
			rt.Fatal(err)
		}
		top := rapid.IntRange(1, 4).Draw(rt, "top")
		before := ev.quant.Load()
		res, err := Best(ctx, s, ev, BestOptions{Filter: store.PointFilter{ISL: spec.ISL}, SLA: sla, TopK: top, Refine: true})
		if err != nil {
			rt.Fatal(err)
		}
		if n := ev.quant.Load() - before; n != int64(res.Evaluated) {
			rt.Fatalf("%d quantitative evaluations, %d counted and persisted", n, res.Evaluated)
		}
		if len(res.Rows) > top {
			rt.Fatalf("%d rows > top %d", len(res.Rows), top)
		}
		seen := map[string]bool{}
		for i, p := range res.Rows {
			if seen[p.Parallel()] {
				rt.Fatalf("parallel %s reported twice", p.Parallel())
			}
			seen[p.Parallel()] = true
			if i > 0 && p.Legacy.TokensPerSPerGPU > res.Rows[i-1].Legacy.TokensPerSPerGPU {
				rt.Fatal("rows not in throughput order")
			}
			q, _ := ev.Evaluator.Quantitative(ctx, p.PointInputs)
			if q.V[store.QTTFTSteadyP99] > sla.Constraints[0].TargetMs {
				rt.Fatalf("reported row %s has quantitative p99 %v > %v", p.Key[:8], q.V[store.QTTFTSteadyP99], sla.Constraints[0].TargetMs)
			}
			if p.Q.Tier != store.TierQuantitative {
				rt.Fatalf("--sla-refine left row %s at %s", p.Key[:8], p.Q.Tier)
			}
		}
		// Points, when no row is reported, are what a new read of the filter gives
		// once the results are stored; nil otherwise.
		again, err := s.SelectPoints(ctx, store.PointFilter{ISL: spec.ISL})
		if err != nil {
			rt.Fatal(err)
		}
		if len(res.Rows) > 0 && res.Points != nil {
			rt.Fatalf("%d rows reported, and Points holds %d rows", len(res.Rows), len(res.Points))
		}
		if len(res.Rows) == 0 && !reflect.DeepEqual(res.Points, again) {
			rt.Fatalf("Points differ from a new read: %d vs %d rows", len(res.Points), len(again))
		}
	})
}

// TestBestEvaluatesOnlyTheAnswer counts quantitative evaluations with a spy
// (counting): when rows pass, best evaluates the rows it reports (--sla-refine
// upgrades them) and nothing for the closest miss, which is not printed (Points
// nil); when no row can pass, it evaluates nothing and Points carry every
// candidate for the closest miss.
func TestBestEvaluatesOnlyTheAnswer(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	spec := defaultSpec()
	if _, err := Sweep(ctx, s, Synthetic{}, spec, SweepOptions{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	filter := store.PointFilter{ISL: spec.ISL}
	all, err := s.SelectPoints(ctx, filter)
	if err != nil || len(all) < 20 {
		t.Fatalf("%d candidates, %v", len(all), err)
	}
	for _, c := range []struct {
		name     string
		ttft     float64
		top      int
		wantRows int
	}{
		{"every row passes", 1e6, 2, 2},
		{"no row passes", 1e-3, 2, 0},
	} {
		sla, err := SLAInput{TTFT: c.ttft, TTFTPct: "p99"}.Build()
		if err != nil {
			t.Fatal(err)
		}
		for run := range 2 { // the second finds the reported rows stored at quantitative tier
			ev := &counting{Evaluator: Synthetic{}}
			res, err := Best(ctx, s, ev, BestOptions{Filter: filter, SLA: sla, TopK: c.top, Refine: true})
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if run == 0 {
				want = c.wantRows // each reported row upgraded once, nothing else
			}
			if n := ev.quant.Load(); n != int64(want) || res.Evaluated != want || len(res.Rows) != c.wantRows {
				t.Errorf("%s, run %d: %d evaluations (%d counted), %d rows of %d candidates; want %d evaluations, %d rows",
					c.name, run, n, res.Evaluated, len(res.Rows), res.Candidates, want, c.wantRows)
			}
			switch {
			case c.wantRows > 0 && res.Points != nil:
				t.Errorf("%s: Points holds %d rows though %d are reported", c.name, len(res.Points), len(res.Rows))
			case c.wantRows == 0 && len(res.Points) != len(all):
				t.Errorf("%s: Points holds %d rows, want every candidate (%d)", c.name, len(res.Points), len(all))
			}
		}
	}
}

// BenchmarkPrepareQuery100k measures the query pre-pass over 100,000 stored rows
// when every straddler is already resolved (the cost a repeated query pays).
func BenchmarkPrepareQuery100k(b *testing.B) {
	ctx := context.Background()
	s := openStore(b)
	spec := defaultSpec()
	spec.TPs = []int{1, 2, 4, 8}
	n := 0
	for isl := 1000; n < 100000; isl += 7 {
		spec.ISL = isl
		res, err := Sweep(ctx, s, Synthetic{}, spec, SweepOptions{Now: fixedNow, BatchSize: 2048})
		if err != nil {
			b.Fatal(err)
		}
		n += res.Evaluated
	}
	sql := "select * from points where ttft_steady_p99 < 150"
	if _, err := PrepareQuery(ctx, s, Synthetic{}, sql, 0, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n), "rows")
	for b.Loop() { // setup runs once (b.Loop), not once per b.N probe
		qs, err := PrepareQuery(ctx, s, Synthetic{}, sql, 0, 0)
		if err != nil || qs.Evaluated != 0 {
			b.Fatalf("%+v %v", qs, err)
		}
	}
}

func TestLazySafe(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"select * from pareto where ttft_steady_p99 < 200 order by tokens_per_s_per_gpu desc limit 3", true},
		{"select key, p.ttft_steady_p99, itl_p99 as i from pareto p where p.ttft_steady_p99 <= 200 and itl_p99 < 40", true},
		{"select * from pareto where ttft_steady_p99 > 200", false},
		{"select * from pareto where ttft_steady_p99 < 200 order by ttft_steady_p99 desc limit 3", false},
		{"select max(ttft_steady_p99) from pareto where ttft_steady_p99 < 200", false},
		{"select * from pareto where ttft_steady_p99 < 200 order by itl_p99 limit 3", false},
		{"select * from points where ttft_steady_p99 < 200 and queueing_tier = 'quantitative'", false},
		{"select * from pareto where ttft_steady_p99 between 1 and 200", false},
	} {
		if got := lazySafe(c.sql); got != c.want {
			t.Errorf("lazySafe(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// TestBestNoRefineNeverShowsViolations is issue 8 item 3 at the library level:
// without refinement, every reported row's stored numbers (the ones printed) meet
// every constraint, rows proven to pass come first and undecided ones after, each
// group in throughput order; with refinement, every row is proven.
func TestBestNoRefineNeverShowsViolations(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		spec := randomSweep(rt, s, Synthetic{}, n)
		all, _ := s.SelectPoints(ctx, store.PointFilter{ISL: spec.ISL})
		if len(all) == 0 {
			return
		}
		ref := all[rapid.IntRange(0, len(all)-1).Draw(rt, "ref")]
		sla, err := SLAInput{TTFT: ref.Q.V[store.QTTFTSteadyP99] * rapid.Float64Range(0.7, 1.4).Draw(rt, "scale"), TTFTPct: "p99",
			ITL: ref.Q.V[store.QITLP99] * rapid.Float64Range(0.8, 2).Draw(rt, "itl")}.Build()
		if err != nil {
			rt.Fatal(err)
		}
		top := rapid.IntRange(1, 6).Draw(rt, "top")
		refineOn := rapid.Bool().Draw(rt, "refine")
		res, err := Best(ctx, s, Synthetic{}, BestOptions{Filter: store.PointFilter{ISL: spec.ISL}, SLA: sla, TopK: top, Refine: refineOn})
		if err != nil {
			rt.Fatal(err)
		}
		for i := range res.Rows {
			p := &res.Rows[i]
			if !sla.ValuesMeet(p) {
				rt.Fatalf("row %d %s b%d printed with ttft p99 %.1f itl p99 %.2f against %+v", i, p.Parallel(), p.Batch,
					p.Q.V[store.QTTFTSteadyP99], p.Q.V[store.QITLP99], sla.Constraints)
			}
			if refineOn && res.Verdicts[i] != Pass {
				rt.Fatalf("refined best reported an undecided row %s", p.Parallel())
			}
			if i > 0 && res.Verdicts[i] == Pass && res.Verdicts[i-1] == Straddle {
				rt.Fatal("a proven row after an undecided one")
			}
			if i > 0 && res.Verdicts[i] == res.Verdicts[i-1] && p.Legacy.TokensPerSPerGPU > res.Rows[i-1].Legacy.TokensPerSPerGPU {
				rt.Fatal("rows of one group not in throughput order")
			}
		}
	})
}

// BenchmarkBestPasses runs best over one workload's stored rows (the default agg
// sweep on the synthetic evaluator, Batches 1…512: ~2,000 candidates) under an
// SLA the top rows meet, with --sla-refine: after the first call the reported
// rows are stored at quantitative tier, so ns/op is the funnel's own work (the
// read, stage 1, the walk and the result) with nothing to evaluate.
func BenchmarkBestPasses(b *testing.B) {
	ctx := context.Background()
	s := openStore(b)
	spec := defaultSpec()
	for i := 1; i <= 512; i++ {
		spec.Batches = append(spec.Batches, i)
	}
	res, err := Sweep(ctx, s, Synthetic{}, spec, SweepOptions{Now: fixedNow, BatchSize: 4096})
	if err != nil {
		b.Fatal(err)
	}
	sla, err := SLAInput{TTFT: 1e6, TTFTPct: "p99"}.Build()
	if err != nil {
		b.Fatal(err)
	}
	opt := BestOptions{Filter: store.PointFilter{ISL: spec.ISL}, SLA: sla, Refine: true}
	if r, err := Best(ctx, s, Synthetic{}, opt); err != nil || len(r.Rows) == 0 {
		b.Fatalf("%d rows, %v", len(r.Rows), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := Best(ctx, s, Synthetic{}, opt)
		if err != nil || r.Evaluated != 0 || len(r.Rows) == 0 {
			b.Fatalf("%+v %v", r, err)
		}
	}
	b.ReportMetric(float64(res.Evaluated), "rows")
}
