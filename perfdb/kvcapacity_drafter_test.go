package perfdb

import (
	"context"
	"math"
	"testing"
)

// TestDrafterKVPool: a drafting worker's KV pool holds the drafter's layer — one
// average layer's weights out of the budget and one attention layer's KV per
// token beside the target's — on the budget rule (vLLM) and on SGLang's own
// pool: pool·(perTok + dKV) = pool₀·perTok − weights, within a block either way.
// Without drafts nothing changes, and aiconfigurator's OOM check (the legacy
// estimate's memory) never counts the drafter.
func TestDrafterKVPool(t *testing.T) {
	ctx := context.Background()
	m, err := EmbeddedModel("Qwen/Qwen3-32B")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ backend, version string }{{"vllm", "0.22.0"}, {"sglang", "0.5.14"}} {
		d, err := LoadEmbedded(ctx, "h200_sxm", c.backend, c.version)
		if err != nil {
			t.Fatalf("%s perf data: %v", c.backend, err)
		}
		base, err := NewEstimator(d, m, Config{TP: 2, MoEEP: 1})
		if err != nil {
			t.Fatal(err)
		}
		draft, err := NewEstimator(d, m, Config{TP: 2, MoEEP: 1, Nextn: 3, SeparateDrafter: true})
		if err != nil {
			t.Fatal(err)
		}
		const bs = 16
		pool := func(e *Estimator) int {
			n, err := e.KVCapacityTokens(4096, 512, bs)
			if c.backend == "sglang" {
				n, err = e.SGLangKVPoolTokens(4096, 512, bs, KVPoolKnobs{})
			}
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		p0, p1 := pool(base), pool(draft)
		u, err := base.memory(1, 4096, 512, 0, memOpts{})
		if err != nil {
			t.Fatal(err)
		}
		dW, dKV := draft.drafter(u)
		if w, k := base.drafter(u); w != 0 || k != 0 {
			t.Errorf("%s: a worker without drafts has a drafter (%v GiB, %v B/token)", c.backend, w, k)
		}
		perTok := base.KVBytesPerToken()
		layers := float64(m.Layers)
		if math.Abs(dKV-perTok/layers) > 1e-9*perTok || math.Abs(dW-u.WeightsGiB/layers) > 1e-9*u.WeightsGiB {
			t.Errorf("%s: drafter %v GiB, %v B/token; want one layer: %v GiB, %v B/token", c.backend, dW, dKV, u.WeightsGiB/layers, perTok/layers)
		}
		lhs := float64(p1) * (perTok + dKV)
		rhs := float64(p0)*perTok - dW*(1<<30)
		if d := math.Abs(lhs - rhs); !(p1 < p0) || d > 2*bs*(perTok+dKV) {
			t.Errorf("%s: pool %d → %d tokens with the drafter: %v B against %v B (off by %v)", c.backend, p0, p1, lhs, rhs, d)
		}
		m0, err := base.Memory(8, 4096, 512, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		m1, err := draft.Memory(8, 4096, 512, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if m0.WeightsGiB != m1.WeightsGiB || m0.KVCacheGiB != m1.KVCacheGiB {
			t.Errorf("%s: the legacy memory counts the drafter: weights %v → %v, KV %v → %v", c.backend, m0.WeightsGiB, m1.WeightsGiB, m0.KVCacheGiB, m1.KVCacheGiB)
		}
	}
}
