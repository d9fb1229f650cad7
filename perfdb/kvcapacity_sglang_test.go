package perfdb

import (
	"math"
	"testing"
)

// TestSGLangMemFractionGraphBS: a launch's --cuda-graph-bs list sets
// cuda_graph_max_bs (its maximum), 2 MiB each in the reserve: B200 (180 GiB) tp 8
// reserves 512 + 1.5·16384 + 2·64 + 1024 MiB with graphs up to 64, 2·512 with the
// tier's default — 0.858 vs 0.853.
func TestSGLangMemFractionGraphBS(t *testing.T) {
	b200 := 193273528320.0
	mb := b200 / (1 << 20)
	for _, tc := range []struct {
		graph int
		res   float64
		want  float64
	}{{0, 512 + 1.5*16384 + 2*512 + 1024, 0.853}, {64, 512 + 1.5*16384 + 2*64 + 1024, 0.858}} {
		want := math.RoundToEven((mb-tc.res)/mb*1000) / 1000
		if got := SGLangMemFractionStatic(b200, 8, 1, 1, tc.graph); got != want || got != tc.want {
			t.Errorf("graph bs %d: %v, want %v (%v)", tc.graph, got, want, tc.want)
		}
	}
}
