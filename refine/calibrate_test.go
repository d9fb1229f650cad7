package refine

import (
	"context"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
)

// TestPassAdjustDecomposition: the calibrated pass time is overhead + prefill scale
// × the prefill chunks' own time + decode scale × the rest, exactly, for a linear
// timing (whose prefill-alone pass has the base); the identity changes nothing and
// the per-request overhead goes to the engine's stage time.
func TestPassAdjustDecomposition(t *testing.T) {
	lin := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.1, CtxMsPerToken: 0.0001}
	rapid.Check(t, func(rt *rapid.T) {
		a := PassAdjust{
			PrefillScale: rapid.Float64Range(0.1, 5).Draw(rt, "a"), DecodeScale: rapid.Float64Range(0.1, 5).Draw(rt, "b"),
			PassOverheadMs: rapid.Float64Range(0, 10).Draw(rt, "c"), RequestOverheadMs: rapid.Float64Range(0, 100).Draw(rt, "d"),
		}
		p := timing.Pass{}
		if n := rapid.IntRange(0, 4096).Draw(rt, "n"); n > 0 {
			p.Prefill = []timing.Chunk{{Tokens: n, Computed: rapid.IntRange(0, 4096).Draw(rt, "done")}}
		}
		rows := rapid.IntRange(0, 64).Draw(rt, "rows")
		if rows == 0 && len(p.Prefill) == 0 {
			rows = 1
		}
		for range rows {
			p.Decode = append(p.Decode, rapid.IntRange(1, 8192).Draw(rt, "ctx"))
		}
		var e engine.Spec
		got, err := a.Apply(&e, lin).PassMs(&p)
		if err != nil {
			rt.Fatal(err)
		}
		total, _ := lin.PassMs(&p) // Linear never fails
		want := a.PassOverheadMs + a.DecodeScale*total
		if len(p.Prefill) > 0 {
			pre, _ := lin.PassMs(&timing.Pass{Prefill: p.Prefill})
			want = a.PassOverheadMs + a.PrefillScale*pre + a.DecodeScale*(total-pre)
		}
		if math.Abs(got-want) > 1e-9*want {
			rt.Fatalf("pass %v: got %v want %v", p, got, want)
		}
		if e.StageMs != a.RequestOverheadMs {
			rt.Fatalf("stage %v, want %v", e.StageMs, a.RequestOverheadMs)
		}
		var e2 engine.Spec
		if v, err := Identity().Apply(&e2, lin).PassMs(&p); err != nil || v != total || e2.StageMs != 0 {
			rt.Fatalf("identity changed the pass: %v vs %v", v, total)
		}
	})
}

// TestPassAdjustKeepsDecodeOnlyPricer: a calibrated timing over one that prices
// decode-only passes from (rows, Σctx) keeps that fast path (queueing's decode
// stretches) and gives the same float64 as its own PassMs of such a pass; over
// a timing without it, it does not pretend to have one.
func TestPassAdjustKeepsDecodeOnlyPricer(t *testing.T) {
	lin := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.1, CtxMsPerToken: 0.0001}
	a := PassAdjust{PrefillScale: 0.7, DecodeScale: 1.3, PassOverheadMs: 0.4, RequestOverheadMs: 9}
	var e engine.Spec
	adj := a.Apply(&e, lin)
	d, ok := adj.(decodeOnlyPricer)
	if !ok {
		t.Fatalf("calibrated linear timing %T lost DecodeOnlyMs", adj)
	}
	rapid.Check(t, func(rt *rapid.T) {
		var p timing.Pass
		sum := 0
		for range rapid.IntRange(1, 200).Draw(rt, "rows") {
			c := rapid.IntRange(1, 8192).Draw(rt, "ctx")
			p.Decode = append(p.Decode, c)
			sum += c
		}
		want, err := adj.PassMs(&p)
		if err != nil {
			rt.Fatal(err)
		}
		if got, err := d.DecodeOnlyMs(len(p.Decode), sum); err != nil || got != want {
			rt.Fatalf("DecodeOnlyMs %v (err %v), PassMs %v", got, err, want)
		}
	})
	plain := timing.Func(func(p *timing.Pass) (float64, error) { return 1, nil })
	if _, ok := a.Apply(&e, plain).(decodeOnlyPricer); ok {
		t.Error("calibrated timing claims DecodeOnlyMs over a timing without it")
	}
}

// spanLinear is Linear priced at the summed context rounded down to a
// multiple of 1000 per row (a bucketed timing with spans, as perfdb.PassTiming).
type spanLinear struct{ l timing.Linear }

func (s spanLinear) PassMs(p *timing.Pass) (float64, error) {
	if len(p.Prefill) > 0 {
		return s.l.PassMs(p)
	}
	return s.DecodeOnlyMs(len(p.Decode), p.DecodeContext())
}

func (s spanLinear) DecodeOnlyMs(rows, ctx int) (float64, error) {
	return s.l.DecodeOnlyMs(rows, ctx/(1000*rows)*1000*rows)
}

func (s spanLinear) DecodeOnlySpanMs(rows, ctx int) (float64, int, error) {
	v, err := s.DecodeOnlyMs(rows, ctx)
	return v, (ctx/(1000*rows)+1)*1000*rows - 1, err
}

// TestPassAdjustKeepsSpan: a calibrated timing over a span pricer is one,
// with the wrapped span and the float64 of its own DecodeOnlyMs anywhere in
// it; over a decode-only pricer without spans it claims none.
func TestPassAdjustKeepsSpan(t *testing.T) {
	in := spanLinear{timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.1, CtxMsPerToken: 0.0001}}
	a := PassAdjust{PrefillScale: 0.7, DecodeScale: 1.3, PassOverheadMs: 0.4, RequestOverheadMs: 9}
	var e engine.Spec
	adj := a.Apply(&e, in)
	sp, ok := adj.(decodeSpanPricer)
	if !ok {
		t.Fatalf("calibrated span timing %T lost DecodeOnlySpanMs", adj)
	}
	d := adj.(decodeOnlyPricer)
	rapid.Check(t, func(rt *rapid.T) {
		rows := rapid.IntRange(1, 300).Draw(rt, "rows")
		ctx := rows * rapid.IntRange(1, 20000).Draw(rt, "mean")
		v, maxCtx, err := sp.DecodeOnlySpanMs(rows, ctx)
		_, wantMax, _ := in.DecodeOnlySpanMs(rows, ctx)
		if err != nil || maxCtx != wantMax {
			rt.Fatalf("span to %d (err %v), the wrapped timing's to %d", maxCtx, err, wantMax)
		}
		for _, x := range []int{ctx, maxCtx, rapid.IntRange(ctx, maxCtx).Draw(rt, "x")} {
			if got, err := d.DecodeOnlyMs(rows, x); err != nil || got != v {
				rt.Fatalf("DecodeOnlyMs(%d, %d) = %v (err %v), the span's price %v", rows, x, got, err, v)
			}
		}
	})
	if _, ok := a.Apply(&e, in.l).(decodeSpanPricer); ok {
		t.Error("calibrated timing claims DecodeOnlySpanMs over a timing without it")
	}
}

// TestPassAdjustValidate: non-finite, zero scales and negative overheads are refused.
func TestPassAdjustValidate(t *testing.T) {
	for _, a := range []PassAdjust{{0, 1, 0, 0}, {1, math.NaN(), 0, 0}, {1, 1, -1, 0}, {1, 1, 0, math.Inf(1)}} {
		if a.Validate() == nil {
			t.Errorf("%+v accepted", a)
		}
	}
	if err := Identity().Validate(); err != nil {
		t.Error(err)
	}
}

// BenchmarkQuantitativeCalibrated: one quantitative evaluation of a perf-data
// point (Qwen3-32B tp2 on h200, vLLM 0.22.0, C 16, isl 2000, osl 256),
// uncalibrated and calibrated. The wrapper's own cost shows in "scales" (same
// schedule shape); overheads move the point itself (another limit cycle), so
// "scales+overheads" is another workload, not the wrapper's cost.
func BenchmarkQuantitativeCalibrated(b *testing.B) {
	ev := NewPerfdbEvaluator(sharedSource(b))
	ctx := context.Background()
	r, err := ev.Resolve(ctx, "Qwen/Qwen3-32B", "h200_sxm", "vllm", "0.22.0")
	if err != nil {
		b.Fatal(err)
	}
	in := store.PointInputs{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm", Version: r.Version, Mode: store.ModeAgg,
		ISL: 2000, OSL: 256, TP: 2, PP: 1, DP: 1, MoETP: 1, MoEEP: 1, Batch: 16, CtxTokens: 3500, MaxNumBatchedTokens: 3516,
		MaxNumSeqs: 16, ChunkedPrefill: true, DatabaseMode: r.DatabaseMode, GemmQuant: r.GemmQuant, KVCacheQuant: r.KVCacheQuant,
		FMHAQuant: r.FMHAQuant, MoEQuant: r.MoEQuant, CommQuant: r.CommQuant, Evaluator: ev.Name()}
	for _, c := range []struct {
		name string
		adj  PassAdjust
	}{{"none", Identity()}, {"scales", PassAdjust{PrefillScale: 0.8, DecodeScale: 1.1}},
		{"scales+overheads", PassAdjust{PrefillScale: 0.8, DecodeScale: 1.1, PassOverheadMs: 0.3, RequestOverheadMs: 2}}} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := ev.QuantitativeAdjusted(ctx, in, c.adj); err != nil { // warm the pass cache
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := ev.QuantitativeAdjusted(ctx, in, c.adj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
