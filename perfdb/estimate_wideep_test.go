package perfdb

import (
	"context"
	"math"
	"testing"
)

// TestWideEPEstimateH200: DeepSeek-R1 on h200 SGLang 0.5.14 (embedded data),
// dp 8 × moe-ep 8, wide-EP with the fp8_block fmha the DeepEP MLA tables are
// keyed by. Golden pass latencies (regression values of this composition;
// each wide-EP kernel is pinned by hand values in TestWideEPQueryHandValues),
// and the deployments the tables do not cover are refused naming the gap.
func TestWideEPEstimateH200(t *testing.T) {
	d, err := LoadEmbedded(context.Background(), "h200_sxm", "sglang", "0.5.14", WithoutSnapshot(),
		OnlyTables("gemm_perf", "wideep_deepep_normal_perf", "wideep_deepep_ll_perf", "wideep_context_moe_perf",
			"wideep_generation_moe_perf", "wideep_context_mla_perf", "wideep_generation_mla_perf"))
	if err != nil {
		t.Fatal(err)
	}
	m := embeddedModel(t, "deepseek-ai/DeepSeek-R1")
	cfg := Config{TP: 1, DP: 8, MoEEP: 8, WideEP: true, FMHAQuant: FMHAFP8Block}
	e, err := NewEstimator(d, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.ContextMs(4, 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.GenerationMs(32, 1024, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name      string
		got, want float64
	}{{"context b4 isl1024", c.LatencyMs, 487.56354947380953}, {"generation b32 kv1025", g.LatencyMs, 35.00735651224694}} {
		if math.Abs(v.got-v.want) > 1e-9*v.want {
			t.Errorf("%s = %.15g ms, want %.15g", v.name, v.got, v.want)
		}
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{TP: 1, DP: 8, MoEEP: 8, WideEP: true, FMHAQuant: FMHABF16},
			"wide-EP on sglang for deepseek-ai/DeepSeek-R1 at moe-ep 8 cannot be priced: context_attention: wide-EP context MLA: no flashinfer rows for fmha bfloat16, kv fp8 in wideep_context_mla_perf (fmha there: fp8_block); drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{Config{TP: 1, DP: 16, MoEEP: 16, WideEP: true, FMHAQuant: FMHAFP8Block},
			"wide-EP on sglang for deepseek-ai/DeepSeek-R1 at moe-ep 16 cannot be priced: context_moe_dispatch: deepep_ht dispatch: only one node at the 20-SM budget is modeled (nodes 2, sms 20); the reference's (sms, tokens) grid is not; drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{Config{TP: 1, DP: 4, MoEEP: 4, WideEP: true, FMHAQuant: FMHAFP8Block},
			"wide-EP on sglang for deepseek-ai/DeepSeek-R1 at moe-ep 4 cannot be priced: context_moe_dispatch: deepep_ht dispatch: no all-to-all data for ep 4 over 1 node(s), hidden 7168, top-k 8, 256 experts (wideep_deepep_normal_perf); drop --wide-ep to price the fused all-gather/reduce-scatter path"},
	} {
		if _, err := NewEstimator(d, m, c.cfg); err == nil || err.Error() != c.want {
			t.Errorf("dp %d ep %d: err = %v\nwant %s", c.cfg.DP, c.cfg.MoEEP, err, c.want)
		}
	}
}
