package refine

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// quantBenchPoints enumerates the default agg sweep (Qwen3-32B, h200_sxm, vLLM, 8
// GPUs, isl 4000 / osl 500) and picks a few spread points: the first, middle and
// last of the enumeration plus one in between.
func quantBenchPoints(b *testing.B, ev *PerfdbEvaluator) []store.PointInputs {
	b.Helper()
	spec := defaultSpec()
	r, err := ev.Resolve(context.Background(), spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		b.Fatal(err)
	}
	pts, err := Enumerate(spec, r, ev.Name())
	if err != nil || len(pts) < 4 {
		b.Fatalf("%d points, %v", len(pts), err)
	}
	n := len(pts)
	return []store.PointInputs{pts[0], pts[n/3], pts[2*n/3], pts[n-1]}
}

// BenchmarkQuantitativePerfdb measures the perf-data quantitative tier of one sweep
// point (PerfdbEvaluator.Quantitative; ns/op is per point). warm: the evaluator's
// estimators and pass caches are built; cold: perf data and queriers are loaded
// but every iteration starts with new estimators and empty pass caches, as each
// point of a sweep sees its (tp, pp, …) estimator for the first time.
func BenchmarkQuantitativePerfdb(b *testing.B) {
	src := sharedSource(b)
	ctx := context.Background()
	base := NewPerfdbEvaluator(src)
	pts := quantBenchPoints(b, base)
	for _, in := range pts { // loads data, queriers, models
		if _, err := base.Quantitative(ctx, in); err != nil {
			b.Fatalf("warm-up %s b%d: %v", in.Parallel(), in.Batch, err)
		}
	}
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			forgetQuantitative(base) // the simulation, not its reuse
			if _, err := base.Quantitative(ctx, pts[i%len(pts)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		var ev *PerfdbEvaluator
		for i := range b.N {
			if i%len(pts) == 0 {
				ev = NewPerfdbEvaluator(src)
				ev.data, ev.queriers, ev.models = base.data, base.queriers, base.models
			}
			if _, err := ev.Quantitative(ctx, pts[i%len(pts)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkQuantitativePerfDataKVTight is one KV-tight point of the default agg
// sweep priced from perf data (tp 8, batch 1024: the memory model's KV pool holds
// ~880 requests, so every pass admits prompts while the rest wait; no decode-only
// stretch for the fast path and no limit cycle within the horizon: each of the
// five runs simulates ~24k passes of ~880 rows). The evaluator is warm (estimator
// and pass cache built), so ns/op is the queueing recursion.
func BenchmarkQuantitativePerfDataKVTight(b *testing.B) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(sharedSource(b))
	pts := quantBenchPoints(b, ev)
	in := pts[len(pts)-1]
	if _, err := ev.Quantitative(ctx, in); err != nil {
		b.Fatalf("warm-up %s b%d: %v", in.Parallel(), in.Batch, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		forgetQuantitative(ev) // the simulation, not its reuse
		if _, err := ev.Quantitative(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
