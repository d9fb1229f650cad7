package perfdb

// query_bench_test.go measures each query kind on the h200_sxm vllm 0.24.0
// data (Qwen3-32B TP8-like shapes): run with
// go test ./perfdb -run '^$' -bench Query -benchtime 100ms.

import "testing"

func BenchmarkQuery(b *testing.B) {
	q := qtQuerier(b, "h200_sxm", "vllm", "0.24.0", ModeSilicon)
	e, _ := q.WithMode(ModeEmpirical)
	cases := []struct {
		name string
		f    func() (Perf, error)
	}{
		// (10240, 5120) is a collected site: own m-curve lerp.
		{"GemmSite", func() (Perf, error) { return q.Gemm(GemmBF16, 1000, 10240, 5120) }},
		// down-proj k = 25600/8 = 3200 is not collected: 4-site util transfer.
		{"GemmTransfer", func() (Perf, error) { return q.Gemm(GemmBF16, 1000, 5120, 3200) }},
		{"GemmExact", func() (Perf, error) { return q.Gemm(GemmBF16, 1024, 4096, 4096) }},
		{"ContextAttention", func() (Perf, error) {
			return q.ContextAttention(1, 3000, 0, 8, 1, 128, 0, KVBF16, FMHABF16)
		}},
		{"ContextAttentionHold", func() (Perf, error) {
			return q.ContextAttention(64, 16384, 0, 8, 1, 128, 0, KVBF16, FMHABF16)
		}},
		{"GenerationAttention", func() (Perf, error) { return q.GenerationAttention(24, 1536, 8, 1, 128, 0, KVBF16) }},
		{"CustomAllReduce", func() (Perf, error) { return q.CustomAllReduce(CommHalf, 8, 3000*5120) }},
		{"NCCL", func() (Perf, error) { return q.NCCL(CommHalf, 8, NCCLAllGather, 123456) }},
		{"MoE", func() (Perf, error) {
			return q.MoE(MoEArgs{Quant: MoEBF16, Distribution: "power_law_1.2", TopK: 8, NumExperts: 128,
				Hidden: 2048, Inter: 768, MoETP: 1, MoEEP: 1, AttentionDP: 1, IsGated: true}, 333)
		}},
		{"MemOp", func() (Perf, error) { return q.MemOp(1e6) }},
		{"GemmEmpirical", func() (Perf, error) { return e.Gemm(GemmBF16, 1000, 5120, 3200) }},
		// Issue-12 families (DeepSeek-V3 TP8, DeepSeek-V3.2 TP8, Qwen3.5-397B TP8 shapes).
		{"MLAContextModule", func() (Perf, error) {
			return q.MLAContextModule(1, 3000, 0, 16, 128, KVFP8, FMHABF16, GemmFP8Block, false)
		}},
		{"MLAGenerationModule", func() (Perf, error) { return q.MLAGenerationModule(24, 1536, 16, 128, KVFP8, GemmFP8Block, false) }},
		{"DSAContext", func() (Perf, error) {
			return q.DSAContext(1, 3000, 0, 16, "DeepseekV32ForCausalLM", KVFP8, FMHABF16, GemmFP8Block)
		}},
		{"DSAGeneration", func() (Perf, error) {
			return q.DSAGeneration(24, 1536, 16, "DeepseekV32ForCausalLM", KVFP8, GemmFP8Block)
		}},
		{"GDNContext", func() (Perf, error) {
			return q.GDN(GDNShape{Kernel: "chunk_gated_delta_rule", Phase: "context", DModel: 4096, DConv: 4, NK: 2, HK: 128, NV: 8, HV: 128}, 1, 3000)
		}},
	}
	for _, c := range cases {
		if _, err := c.f(); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := c.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNewQuerier(b *testing.B) {
	q := qtQuerier(b, "h200_sxm", "vllm", "0.24.0", ModeSilicon)
	_ = q
	qtData.Lock()
	d := qtData.m["h200_sxm/vllm/0.24.0"]
	qtData.Unlock()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := NewQuerier(d, ModeSilicon); err != nil {
			b.Fatal(err)
		}
	}
}
