package perfdb

// sol_test.go checks the SOL and memory-op formulas against numbers
// computed by hand from PERFDB.md §1.5 with the h200_sxm spec of §1.6, and
// the database-mode dispatch on an empty table set.

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// qtH200 is the verbatim h200_sxm.yaml spec (PERFDB.md §1.6).
func qtH200() *System {
	return &System{
		Name: "h200_sxm", DataDir: "data/h200_sxm",
		MemBW: 4.8e12, MemBWEmpiricalScalingFactor: 0.8, MemEmpiricalConstantLatency: 3e-6,
		MemCapacity: 151397597184, BF16TCFlops: 989e12, INT8TCFlops: 1978e12, FP8TCFlops: 1978e12,
		Power: 700, SMVersion: 90,
		NumGPUsPerNode: 8, InterNodeBW: 50e9, IntraNodeBW: 450e9, PCIeBW: 64e9, P2PLatency: 1e-5,
	}
}

func qtSOLQuerier(t *testing.T, mode DatabaseMode) *Querier {
	t.Helper()
	q, err := NewQuerier(&Data{System: qtH200(), Backend: "vllm", Version: "0.24.0"}, mode)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestSOLFormulasH200(t *testing.T) {
	q := qtSOLQuerier(t, ModeSOL)
	check := func(label string, p Perf, err error, want float64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		if p.Source != SourceSOL || p.EnergyWms != 0 {
			t.Errorf("%s: source %v energy %v, want sol and 0", label, p.Source, p.EnergyWms)
		}
		approxRel(t, label, p.LatencyMs, want)
	}
	// GEMM bf16 32768×65536×12288 is compute-bound: 2mnk/989e12 s = 53.37 ms
	// (PERFDB.md §1.2 quotes 53.4 ms against a measured 63.83).
	p, err := q.Gemm(GemmBF16, 32768, 65536, 12288)
	check("gemm bf16", p, err, 2.0*32768*65536*12288/989e12*1000)
	// fp8 m=1 GEMM is memory-bound: 1 B·(n + k + nk)/4.8e12.
	p, err = q.Gemm(GemmFP8, 1, 4096, 4096)
	check("gemm fp8 m=1", p, err, (4096.0+4096+4096*4096)/4.8e12*1000)
	// Context attention, no prefix, b=1 s=4096 n=32 h=128 n_kv=8 bf16:
	// ops = 2·b·s²·n·h·2/2, compute-bound.
	p, err = q.ContextAttention(1, 4096, 0, 32, 8, 128, 0, KVBF16, FMHABF16)
	check("ctx attn", p, err, 2.0*4096*4096*32*128*2/2/989e12*1000)
	// With a prefix the causal work is (full² − prefix²).
	p, err = q.ContextAttention(1, 1024, 3072, 32, 8, 128, 0, KVBF16, FMHABF16)
	check("ctx attn prefix", p, err, 2.0*(4096.0*4096-3072*3072)*32*128*2/2/989e12*1000)
	// Decode b=8 s=4097 n=32 n_kv=8 h=128 fp8 KV is memory-bound:
	// bytes = b·(2nh + 2·n_kv·kv·h·1 + 2nh), kv = s−1.
	p, err = q.GenerationAttention(8, 4097, 32, 8, 128, 0, KVFP8)
	check("gen attn", p, err, 8*(2*32*128+2*8*4096*128*1.0+2*32*128)/4.8e12*1000)
	// Custom all-reduce TP8 of 1 M elements: 2·size·2/tp·(tp−1)/450e9.
	p, err = q.CustomAllReduce(CommHalf, 8, 1<<20)
	check("allreduce", p, err, 2.0*(1<<20)*2/8*7/450e9*1000)
	// NCCL all_gather 16 GPUs crosses the node: 2 B·size·15/16/50e9.
	p, err = q.NCCL(CommHalf, 16, NCCLAllGather, 1<<20)
	check("nccl all_gather", p, err, 2.0*(1<<20)*15/16/50e9*1000)
	p, err = q.NCCL(CommHalf, 8, NCCLAllReduce, 1<<20)
	check("nccl all_reduce", p, err, 2*2.0*(1<<20)*7/8/450e9*1000)
	// Memory-bound op and P2P in SOL mode: pure bandwidth, no constants.
	p, err = q.MemOp(1e6)
	check("mem op sol", p, err, 1e6/4.8e12*1000)
	p, err = q.P2P(1e6)
	check("p2p sol", p, err, 1e6/50e9*1000)
	// MoE Qwen3-30B-A3B shape at 1 token, bf16, gated: memory-bound by the
	// topk·h·inter·3 weights: bytes = 2·(8·2048·2 + 8·768·3 + 2048·768·3·8).
	p, err = q.MoE(MoEArgs{Quant: MoEBF16, Distribution: "power_law_1.2", TopK: 8, NumExperts: 128,
		Hidden: 2048, Inter: 768, MoETP: 1, MoEEP: 1, IsGated: true}, 1)
	check("moe", p, err, 2.0*(8*2048*2+8*768*3+2048*768*3*8)/4.8e12*1000)
}

func TestMemOpAndP2PEmpiricalH200(t *testing.T) {
	for _, mode := range []DatabaseMode{ModeSilicon, ModeHybrid, ModeEmpirical} {
		q := qtSOLQuerier(t, mode)
		// bytes/(4.8e12·0.8) + 3 µs: the 3.84 TB/s effective bandwidth of §1.5.
		p, err := q.MemOp(3.84e6)
		if err != nil || p.Source != SourceEmpirical {
			t.Fatalf("%s mem op: %+v %v", mode, p, err)
		}
		approxRel(t, "mem op", p.LatencyMs, 1e-3+3e-3)
		// bytes/50e9 + 10 µs.
		p, err = q.P2P(5e6)
		if err != nil || p.Source != SourceEmpirical {
			t.Fatalf("%s p2p: %+v %v", mode, p, err)
		}
		approxRel(t, "p2p", p.LatencyMs, 0.1+0.01)
	}
}

func TestModesOnEmptyTables(t *testing.T) {
	sil := qtSOLQuerier(t, ModeSilicon)
	if _, err := sil.Gemm(GemmBF16, 64, 4096, 4096); !IsMiss(err) {
		t.Errorf("SILICON without a table: want a structured miss, got %v", err)
	}
	for _, mode := range []DatabaseMode{ModeHybrid, ModeEmpirical} {
		q := qtSOLQuerier(t, mode)
		_, err := q.Gemm(GemmBF16, 64, 4096, 4096)
		if !errors.As(err, new(*EmpiricalMissError)) {
			t.Errorf("%s without any data: want EmpiricalMissError (never a fabricated value), got %v", mode, err)
		}
	}
	// tp ≤ 1 collectives are free in every mode.
	for _, mode := range []DatabaseMode{ModeSilicon, ModeSOL} {
		q := qtSOLQuerier(t, mode)
		if p, err := q.CustomAllReduce(CommHalf, 1, 1e6); err != nil || p.LatencyMs != 0 {
			t.Errorf("%s tp=1 all-reduce: %+v %v", mode, p, err)
		}
	}
}

func TestQueryBadInput(t *testing.T) {
	q := qtSOLQuerier(t, ModeSOL)
	for _, c := range []struct {
		label string
		err   error
		want  string
	}{
		{"negative m", func() error { _, e := q.Gemm(GemmBF16, -1, 2, 3); return e }(), "m = -1"},
		{"unknown quant", func() error { _, e := q.Gemm("int3", 1, 2, 3); return e }(), `"int3"`},
		{"fp4 on h200", func() error { _, e := q.Gemm(GemmNVFP4, 1, 2, 3); return e }(), "fp4_tc_flops"},
		{"zero heads", func() error { _, e := q.ContextAttention(1, 8, 0, 0, 0, 128, 0, KVBF16, FMHABF16); return e }(), "num_heads"},
		{"nan bytes", func() error { _, e := q.MemOp(math.NaN()); return e }(), "bytes"},
		{"bad mode", func() error { _, e := q.WithMode("FAST"); return e }(), "SILICON, HYBRID"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.label, c.err, c.want)
		}
		if c.err != nil && strings.Contains(c.err.Error(), "\n") {
			t.Errorf("%s: error must be one line: %q", c.label, c.err)
		}
	}
	if _, err := NewQuerier(nil, ModeSilicon); err == nil {
		t.Error("NewQuerier(nil) must fail")
	}
}

func TestParseTransferPolicy(t *testing.T) {
	for spec, want := range map[string]TransferPolicy{
		"":                 AllTransfers,
		"off":              {},
		"conservative":     {XShape: true},
		"balanced":         {XShape: true, XQuant: true},
		"Aggressive":       AllTransfers,
		"xshape, xprofile": {XShape: true, XProfile: true},
	} {
		got, err := ParseTransferPolicy(spec)
		if err != nil || got != want {
			t.Errorf("%q: got %+v %v, want %+v", spec, got, err, want)
		}
	}
	if _, err := ParseTransferPolicy("xshapes"); err == nil || !strings.Contains(err.Error(), "presets") {
		t.Errorf("unknown token: %v", err)
	}
}
