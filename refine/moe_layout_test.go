package refine

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// TestEnumerateMoELayoutsValid is issue 8 item 2: every MoE point Enumerate emits
// has a valid MoE layout on every worker (tp·dp = moe_tp·moe_ep), the prefill pool
// of disagg rows included, and the evaluator prices a disagg row whose pools differ
// in width (p tp1, d tp2 crashed the sweep with "tp (1) × dp (1) must equal moe-tp (2)").
func TestEnumerateMoELayoutsValid(t *testing.T) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	spec := SweepSpec{Model: "Qwen/Qwen3-30B-A3B", System: "h200_sxm", Backend: "vllm", TotalGPUs: 16, ISL: 4000, OSL: 500,
		Modes: []string{store.ModeAgg, store.ModeDisagg}}
	r, err := ev.Resolve(ctx, spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		t.Fatal(err)
	}
	if !r.MoE {
		t.Fatal("Qwen3-30B-A3B resolved as dense")
	}
	pts, err := Enumerate(spec, r, ev.Name())
	if err != nil {
		t.Fatal(err)
	}
	var mixed *store.PointInputs
	for i := range pts {
		p := &pts[i]
		if p.TP*p.DP != p.MoETP*p.MoEEP {
			t.Fatalf("%s %s: tp·dp %d ≠ moe_tp·moe_ep %d", p.Mode, p.Parallel(), p.TP*p.DP, p.MoETP*p.MoEEP)
		}
		if p.Mode != store.ModeDisagg {
			continue
		}
		for _, pool := range [][2]int{{p.PTP, p.PDP}, {p.DTP, p.DDP}} {
			mtp, mep, err := PoolMoELayout(pool[0], pool[1], p.MoEEP)
			if err != nil || pool[0]*pool[1] != mtp*mep {
				t.Fatalf("%s: pool tp %d dp %d → moe %d×%d, %v", p.Parallel(), pool[0], pool[1], mtp, mep, err)
			}
		}
		if mixed == nil && p.PTP != p.DTP {
			mixed = p
		}
	}
	if mixed == nil {
		t.Fatal("no disagg row with pools of different widths enumerated")
	}
	l, err := ev.Legacy(ctx, *mixed)
	if err != nil {
		t.Fatalf("legacy of %s: %v", mixed.Parallel(), err)
	}
	if !l.OOM && !(l.TTFT > 0) {
		t.Fatalf("legacy of %s: %+v", mixed.Parallel(), l)
	}
	if _, _, err := PoolMoELayout(3, 1, 2); err == nil {
		t.Fatal("moe_ep 2 accepted for a pool of width 3")
	}
}
