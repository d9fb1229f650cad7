package refine

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
)

// TestEagleDrafterPricesWithoutMTPLayers: a sweep row of a model without MTP
// layers (Llama-3.1-70B) runs drafts only from a separate drafter. With an
// EAGLE3 head in the engine config its points record the drafter
// (WorkerConfig: SeparateDrafter), price and run the drafts — a decode faster
// per token than without them at two of three drafts accepted; with --nextn
// alone the row is refused naming the way to give the head.
func TestEagleDrafterPricesWithoutMTPLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: perf-data evaluations")
	}
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	spec := SweepSpec{Model: "meta-llama/Meta-Llama-3.1-70B", System: "h200_sxm", Backend: "vllm", TotalGPUs: 4, ISL: 1024, OSL: 256,
		TPs: []int{4}, Modes: []string{store.ModeAgg}, Batches: []int{16}, CtxTokens: []int{2048}, MaxWorkers: 1,
		EngineProfile: queueing.ProfileAIConfigurator}
	plain := onePoint(t, ev, spec)
	spec.NextN, spec.NextNAccepted = 3, 2
	if _, err := ev.Quantitative(ctx, onePoint(t, ev, spec)); err == nil || !strings.Contains(err.Error(),
		"has no MTP layers (its config names no num_nextn_predict_layers, mtp_num_hidden_layers or num_mtp_modules), so it cannot run MTP / NEXTN speculative decoding; drop --nextn, or draft with an EAGLE / EAGLE3 head (eval or sweep --engine-config: speculative_config method eagle3, model and num_speculative_tokens)") {
		t.Fatalf("--nextn without a head: %v", err)
	}
	cfg, err := engineconf.Parse("vllm", []byte("speculative_config:\n  method: eagle3\n  model: org/EAGLE3-head\n  num_speculative_tokens: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec.EngineConfig = cfg
	eagle := onePoint(t, ev, spec)
	wc, err := WorkerConfig(eagle, Worker{TP: 4, PP: 1, DP: 1, MoETP: 1, MoEEP: 1})
	if err != nil || !wc.SeparateDrafter || wc.Nextn != 3 {
		t.Fatalf("worker config %+v, %v: want 3 drafts from a separate drafter", wc, err)
	}
	if wc, _ := WorkerConfig(plain, Worker{TP: 4, PP: 1, DP: 1, MoETP: 1, MoEEP: 1}); wc.SeparateDrafter {
		t.Fatal("a row without drafts reads a separate drafter")
	}
	a, err := ev.Quantitative(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ev.Quantitative(ctx, eagle)
	if err != nil {
		t.Fatalf("EAGLE3 row: %v", err)
	}
	if ta, tb := a.V[store.QTPOTMean], b.V[store.QTPOTMean]; !(tb < 0.75*ta) {
		t.Errorf("TPOT mean %v ms with the head (3 drafts, 2 accepted), %v without: want well below", tb, ta)
	}
}
