package refine

import (
	"context"
	"errors"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// TestPointSetupPoolError: trace replay's point set-up sizes the KV pool at the
// trace's longest request; a worker that cannot hold that request is an error
// wrapping perfdb.ErrOOM and naming the point and the request, not a replay with
// an unbounded pool (KVTokens 0) as before.
func TestPointSetupPoolError(t *testing.T) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm", TotalGPUs: 1, ISL: 1000, OSL: 200,
		TPs: []int{1}, Batches: []int{8}, CtxTokens: []int{1000}, Modes: []string{store.ModeAgg}}
	pts := sweepPoints(t, ev, spec)
	if len(pts) != 1 {
		t.Fatalf("enumerate: %d points, want 1", len(pts))
	}
	in := pts[0]
	ps, err := ev.PointSetup(ctx, in, 4000, 500)
	if err != nil || ps.KVTokens <= 0 {
		t.Fatalf("a trace the worker holds: pool %d, %v", ps.KVTokens, err)
	}
	_, err = ev.PointSetup(ctx, in, 400000, 500)
	const want = "trace replay on agg tp1pp1dp1etp1ep1 b8: the KV pool for the trace's longest request (isl 400000 + osl 500): out of memory: vllm KV budget "
	if !errors.Is(err, perfdb.ErrOOM) || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("a trace request the worker cannot hold: %v\nwant an ErrOOM starting %q", err, want)
	}
}
