package refine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// benchSweep measures the default agg sweep (one model, 8 GPUs, one isl/osl) into a
// fresh store, writes included; ev is the evaluator under test.
func benchSweep(b *testing.B, ev Evaluator) {
	benchSweepFresh(b, func() Evaluator { return ev })
}

// benchSweepFresh is benchSweep with a new evaluator per iteration.
func benchSweepFresh(b *testing.B, newEv func() Evaluator) {
	ctx := context.Background()
	dir := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := store.Open(ctx, filepath.Join(dir, fmt.Sprintf("b%d.sqlite", i)), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := Sweep(ctx, s, newEv(), defaultSpec(), SweepOptions{Now: fixedNow})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Evaluated), "points")
		s.Close()
	}
}

// benchRepeat measures a repeated identical sweep (zero evaluations).
func benchRepeat(b *testing.B, ev Evaluator) {
	benchRepeatFresh(b, func() Evaluator { return ev })
}

// benchRepeatFresh is benchRepeat with a new evaluator per run, as the CLI does.
func benchRepeatFresh(b *testing.B, newEv func() Evaluator) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(b.TempDir(), "r.sqlite"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := Sweep(ctx, s, newEv(), defaultSpec(), SweepOptions{Now: fixedNow}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Sweep(ctx, s, newEv(), defaultSpec(), SweepOptions{Now: fixedNow})
		if err != nil || res.Evaluated != 0 {
			b.Fatalf("repeat: %+v %v", res, err)
		}
	}
}

func BenchmarkSweepDefaultAggSynthetic(b *testing.B) { benchSweep(b, Synthetic{}) }
func BenchmarkSweepRepeatedSynthetic(b *testing.B)   { benchRepeat(b, Synthetic{}) }
