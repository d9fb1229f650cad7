package refine

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// BenchmarkSweepDefaultAggStore is the acceptance sweep on an initialised store
// (perf data read from the store, as the CLI does): the default agg sweep for
// Qwen3-32B on 8 h200 GPUs, perf data loading and writes included. Point
// AICDB_BENCH_STORE at a store made by `aicdb init` (it is copied, not changed).
func BenchmarkSweepDefaultAggStore(b *testing.B) {
	src := os.Getenv("AICDB_BENCH_STORE")
	if src == "" {
		b.Skip("set AICDB_BENCH_STORE to a store made by 'aicdb init'")
	}
	path := filepath.Join(b.TempDir(), "bench.sqlite")
	if err := copyFile(src, path); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	spec := defaultSpec()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		spec.OSL = 501 + i // a fresh workload group each time: every point is new
		res, err := Sweep(ctx, s, NewPerfdbEvaluator(StoreSource{St: s}), spec, SweepOptions{Now: fixedNow})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Evaluated), "points")
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
