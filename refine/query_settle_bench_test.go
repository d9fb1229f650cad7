package refine

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// BenchmarkAnswerSettled is the lazy query's pre-pass on a swept store: the
// user's SQL reads every stored row (all columns of the points view) under the
// optimistic and the pessimistic hypotheses. B/op and allocs/op are the memory
// the two answers take; the straddlers are the last rows, so the answers differ
// only near their end.
func BenchmarkAnswerSettled(b *testing.B) {
	ctx := context.Background()
	s := openStore(b)
	if _, err := Sweep(ctx, s, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow}); err != nil {
		b.Fatal(err)
	}
	all, err := s.SelectPoints(ctx, store.PointFilter{})
	if err != nil {
		b.Fatal(err)
	}
	todo := all[len(all)-5:]
	ths := []Threshold{{Column: "ttft_steady_p99", Op: LT, Value: 1e12}}
	q := `SELECT * FROM points WHERE ttft_steady_p99 < 1e12`
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := answerSettled(ctx, s, q, ths, todo); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(all)), "rows")
}
