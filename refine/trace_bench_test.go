package refine

import (
	"context"
	"testing"
	"time"
)

// BenchmarkTraceSweepPoint prices the points of a trace sweep over a 2,000-request
// slice (synthetic evaluator: the calendar and the reuse oracle do the work): per
// point the legacy estimate, the screening lower bounds and the quantitative replay
// on every replica (2 GPUs: tp1 = 2 replicas, tp2 = 1). ns/point is the cost of
// one fully refined row.
func BenchmarkTraceSweepPoint(b *testing.B) {
	ctx := context.Background()
	st := openStore(b)
	importTestTrace(b, st, "t", 2000, 0)
	spec := traceSweepSpec("t", 2, false)
	spec.Batches = []int{8, 32, 128}
	ev := WithTraces(Synthetic{}, st)
	if err := ev.resolveTrace(ctx, &spec); err != nil {
		b.Fatal(err)
	}
	r, err := ev.Resolve(ctx, spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		b.Fatal(err)
	}
	pts, err := Enumerate(spec, r, ev.Name())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		for _, in := range pts {
			if _, err := EvaluatePoint(ctx, ev, in); err != nil {
				b.Fatal(err)
			}
			if _, err := ev.Quantitative(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*len(pts)), "ns/point")
}
