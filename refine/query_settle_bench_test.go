package refine

import (
	"context"
	"testing"
)

// BenchmarkAnswerSettled is the lazy query's pre-pass on a swept store (290
// rows): the user's SQL reads every row (all columns of the points view) under
// the optimistic and the pessimistic hypotheses. B/op and allocs/op are the
// memory the two answers take.
func BenchmarkAnswerSettled(b *testing.B) {
	s, todo, ths := settleFixture(b)
	q := `SELECT * FROM points WHERE ttft_steady_p99 < 1e12`
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := answerSettled(ctx, s, q, ths, todo); err != nil {
			b.Fatal(err)
		}
	}
}
