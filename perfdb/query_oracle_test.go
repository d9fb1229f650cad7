package perfdb

// query_oracle_test.go checks the Querier against values aiconfigurator's
// own unit tests pin (Rust operators/*.rs and perf_database/*.rs test
// modules, each an oracle from the frozen Python engine on the same
// Parquet data, shared layer off). b200_sxm vllm 0.19.0 is the oldest
// b200 vllm version, so its shared layer is its primary data alone.

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// qtData caches loaded Data per (system, backend, version) across tests.
var qtData = struct {
	sync.Mutex
	m map[string]*Data
}{m: map[string]*Data{}}

// qtSystemsDir locates aiconfigurator's systems folder (AICDB_AIC_DATA
// overrides ../shared/data/aiconfigurator), or skips the test.
func qtSystemsDir(t testing.TB) string {
	root := os.Getenv("AICDB_AIC_DATA")
	if root == "" {
		root = "/work/shared/data/aiconfigurator"
	}
	dir := filepath.Join(root, "aic-core", "src", "aiconfigurator_core", "systems")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("aiconfigurator data not found at %s (set AICDB_AIC_DATA): %v", dir, err)
	}
	return dir
}

// qtQuerier loads (cached) data and builds a querier in mode.
func qtQuerier(t testing.TB, system, backend, version string, mode DatabaseMode) *Querier {
	t.Helper()
	dir := qtSystemsDir(t)
	key := system + "/" + backend + "/" + version
	qtData.Lock()
	d, ok := qtData.m[key]
	qtData.Unlock()
	if !ok {
		var err error
		d, err = LoadDir(context.Background(), dir, system, backend, version)
		if err != nil {
			t.Skipf("%s not loadable from %s: %v", key, dir, err)
		}
		qtData.Lock()
		qtData.m[key] = d
		qtData.Unlock()
	}
	q, err := NewQuerier(d, mode)
	if err != nil {
		t.Fatalf("NewQuerier(%s, %s): %v", key, mode, err)
	}
	return q
}

// qtNear asserts |got − want| ≤ 1e-9 (the Rust oracle tolerance) and the source.
func qtNear(t *testing.T, label string, p Perf, err error, want float64, src Source) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: error %v, want %.17g", label, err, want)
		return
	}
	if math.Abs(p.LatencyMs-want) > 1e-9 {
		t.Errorf("%s: latency %.17g, want %.17g (rel %.3g)", label, p.LatencyMs, want, (p.LatencyMs-want)/want)
	}
	if p.Source != src {
		t.Errorf("%s: source %v, want %v", label, p.Source, src)
	}
}

func TestOracleGemmB200(t *testing.T) {
	q := qtQuerier(t, "b200_sxm", "vllm", "0.19.0", ModeSilicon)
	p, err := q.Gemm(GemmBF16, 32768, 65536, 16384)
	qtNear(t, "bf16 exact", p, err, 41.59673055013021, SourceSilicon)
	p, err = q.Gemm(GemmNVFP4, 32768, 65536, 16384)
	qtNear(t, "nvfp4 exact", p, err, 20.538665771484375, SourceSilicon)
	if _, err := q.Gemm(GemmBF16, 8, 1, 2048); !IsMiss(err) {
		t.Errorf("n=1 is 5 octaves below the collected sites: want a structured miss, got %v", err)
	}
	sq, _ := q.WithMode(ModeSOL)
	p, err = sq.Gemm(GemmBF16, 8, 1, 2048)
	qtNear(t, "sol", p, err, 4.78961038961039e-06, SourceSOL)

	e, _ := q.WithMode(ModeEmpirical)
	for _, c := range []struct {
		m, n, k int
		quant   GemmQuant
		want    float64
	}{
		{3000, 65536, 16384, GemmBF16, 3.7278025700902204},
		{777, 4000, 5000, GemmBF16, 0.023767651577298037},
		{32768, 65536, 16384, GemmNVFP4, 20.538665771484375},
		{1, 129, 130, GemmFP8, 0.004668885990466126},
	} {
		p, err := e.Gemm(c.quant, c.m, c.n, c.k)
		qtNear(t, "empirical "+string(c.quant), p, err, c.want, SourceEmpirical)
	}
	h, _ := q.WithMode(ModeHybrid)
	p, err = h.Gemm(GemmInt4WO, 64, 64, 64)
	qtNear(t, "hybrid int4_wo xprofile", p, err, 0.0007006913814463733, SourceEmpirical)
	hb := h.WithTransferPolicy(TransferPolicy{XShape: true, XQuant: true})
	if _, err := hb.Gemm(GemmInt4WO, 64, 64, 64); !errors.As(err, new(*EmpiricalMissError)) {
		t.Errorf("balanced policy must not borrow across profiles: got %v", err)
	}
}

func TestOracleGemmLadderH200(t *testing.T) {
	// Oracles are shared-layer off; 0.19.0 GEMM exists, and the quant
	// ladder only reads the own dtype list of the primary table.
	q := qtQuerier(t, "h200_sxm", "vllm", "0.19.0", ModeHybrid)
	for _, c := range []struct {
		quant GemmQuant
		m     int
		want  float64
	}{
		{GemmSQ, 512, 0.01826755536927117},
		{GemmSQ, 8192, 0.21285422643025717},
		{GemmInt4WO, 512, 0.036529976276703825},
		{GemmInt4WO, 8192, 0.5714972813924153},
	} {
		p, err := q.Gemm(c.quant, c.m, 4096, 4096)
		qtNear(t, "ladder "+string(c.quant), p, err, c.want, SourceEmpirical)
	}
}

func TestOracleAttentionB200(t *testing.T) {
	q := qtQuerier(t, "b200_sxm", "vllm", "0.19.0", ModeSilicon)
	p, err := q.GenerationAttention(32, 2, 64, 4, 128, 0, KVFP8)
	qtNear(t, "gen 5-sample hold", p, err, 0.009131092737966444, SourceSilicon)

	e, _ := q.WithMode(ModeEmpirical)
	for _, c := range []struct {
		b, s, prefix, n, nkv, hs, w int
		kv                          KVQuant
		want                        float64
	}{
		{7, 3000, 0, 64, 1, 128, 0, KVFP8, 0.771381792089557},
		{8, 16384, 0, 64, 1, 128, 0, KVFP8, 19.820667266845703},
		{4, 8192, 8192, 64, 1, 128, 0, KVFP8, 7.964372158050536},
		{4, 4096, 0, 48, 8, 192, 0, KVFP8, 0.7588535312592514},
		{2, 10000, 0, 32, 1, 128, 8192, KVBF16, 6.254832211751053},
		{2, 10000, 0, 32, 1, 128, 4096, KVBF16, 1.0547865593548398},
	} {
		p, err := e.ContextAttention(c.b, c.s, c.prefix, c.n, c.nkv, c.hs, c.w, c.kv, FMHABF16)
		qtNear(t, "ctx empirical", p, err, c.want, SourceEmpirical)
	}
	for _, c := range []struct {
		b, s, n, nkv, hs, w int
		kv                  KVQuant
		want                float64
	}{
		{48, 7777, 64, 8, 128, 0, KVFP8, 0.1302149492334821},
		{32, 2, 64, 4, 128, 0, KVFP8, 0.008661333471536636},
		{16, 4096, 48, 8, 192, 0, KVFP8, 0.03992800042033196},
		{8, 12000, 32, 1, 128, 8192, KVBF16, 0.07096281754412269},
		{8, 12000, 32, 1, 128, 2048, KVBF16, 0.0023706380832401778},
	} {
		p, err := e.GenerationAttention(c.b, c.s, c.n, c.nkv, c.hs, c.w, c.kv)
		qtNear(t, "gen empirical", p, err, c.want, SourceEmpirical)
	}
	h, _ := q.WithMode(ModeHybrid)
	p, err = h.ContextAttention(4, 4096, 0, 48, 8, 192, 0, KVFP8, FMHABF16)
	qtNear(t, "ctx hybrid xshape", p, err, 0.7588535312592514, SourceEmpirical)
	p, err = h.ContextAttention(8, 16384, 0, 64, 1, 128, 0, KVFP8, FMHABF16)
	qtNear(t, "ctx hybrid silicon", p, err, 19.820667266845703, SourceSilicon)
	off := e.WithTransferPolicy(TransferPolicy{})
	if _, err := off.ContextAttention(4, 4096, 0, 48, 8, 192, 0, KVFP8, FMHABF16); !errors.As(err, new(*EmpiricalMissError)) {
		t.Errorf("xshape off: want EmpiricalMissError, got %v", err)
	}
}

func TestOracleCommB200(t *testing.T) {
	q := qtQuerier(t, "b200_sxm", "vllm", "0.19.0", ModeEmpirical)
	for _, c := range []struct {
		tp   int
		size float64
		want float64
	}{
		{8, 300000, 0.0210877421663319},
		{8, 1024, 0.007716159820556641},
		{16, 524288, 0.1607595384120941},
		{2, 777777, 0.019098769751423886},
		{4, 65536, 0.008213120102882384},
	} {
		p, err := q.CustomAllReduce(CommHalf, c.tp, c.size)
		qtNear(t, "allreduce empirical", p, err, c.want, SourceEmpirical)
	}
	for _, c := range []struct {
		n    int
		op   string
		size float64
		want float64
	}{
		{8, NCCLAllReduce, 300000, 0.027067167868039803},
		{4, NCCLAllGather, 10000000, 0.05871496201240777},
		{32, NCCLAllReduce, 1048576, 0.31676464285714284},
		{8, NCCLReduceScatter, 999, 0.015899137756552793},
		{2, NCCLAllToAll, 4096, 0.009470000000000001},
	} {
		p, err := q.NCCL(CommHalf, c.n, c.op, c.size)
		qtNear(t, "nccl empirical "+c.op, p, err, c.want, SourceEmpirical)
	}
	h, _ := q.WithMode(ModeHybrid)
	p, err := h.CustomAllReduce(CommHalf, 8, 300000)
	qtNear(t, "allreduce hybrid", p, err, 0.024691462737973777, SourceSilicon)
	p, err = h.CustomAllReduce(CommHalf, 16, 524288)
	qtNear(t, "allreduce hybrid beyond node", p, err, 0.16075953841209412, SourceSilicon)
	p, err = h.NCCL(CommHalf, 8, NCCLAllReduce, 300000)
	qtNear(t, "nccl hybrid", p, err, 0.02807729736328125, SourceSilicon)
	p, err = h.NCCL(CommHalf, 32, NCCLAllReduce, 1048576)
	qtNear(t, "nccl hybrid beyond max", p, err, 0.3167646428571429, SourceSilicon)
	for _, m := range []*Querier{q, h} {
		if _, err := m.CustomAllReduce(CommHalf, 5, 1024); !errors.As(err, new(*EmpiricalMissError)) {
			t.Errorf("%s tp=5: want EmpiricalMissError, got %v", m.Mode(), err)
		}
		if _, err := m.NCCL(CommHalf, 3, NCCLAllReduce, 1024); !errors.As(err, new(*EmpiricalMissError)) {
			t.Errorf("%s nccl 3 GPUs: want EmpiricalMissError, got %v", m.Mode(), err)
		}
	}
	p, err = q.NCCL(CommHalf, 8, "broadcast", 1024)
	qtNear(t, "unknown collective", p, err, 0, SourceEmpirical)
}

func TestOracleMoEB200(t *testing.T) {
	args := func(quant MoEQuant) MoEArgs {
		return MoEArgs{Quant: quant, Distribution: "power_law_1.2", TopK: 8, NumExperts: 128,
			Hidden: 4096, Inter: 1536, MoETP: 1, MoEEP: 8, AttentionDP: 1, IsGated: true}
	}
	e := qtQuerier(t, "b200_sxm", "vllm", "0.19.0", ModeEmpirical)
	p, err := e.MoE(args(MoEBF16), 333)
	qtNear(t, "moe own empirical 333", p, err, 0.19184494219320924, SourceEmpirical)
	p, err = e.MoE(args(MoEBF16), 96)
	qtNear(t, "moe own empirical 96", p, err, 0.13852159976959227, SourceEmpirical)
	h, _ := e.WithMode(ModeHybrid)
	p, err = h.MoE(args(MoEBF16), 128)
	qtNear(t, "moe hybrid exact", p, err, 0.146451199054718, SourceSilicon)
	p, err = h.MoE(args(MoEBF16), 333)
	qtNear(t, "moe hybrid lerp", p, err, 0.19178520552814007, SourceSilicon)
	p, err = h.MoE(args(MoEW4A16MXFP4Cutlass), 96)
	qtNear(t, "moe xquant", p, err, 0.329638409614563, SourceEmpirical)
	p, err = h.MoE(args(MoEW4AFP8), 96)
	qtNear(t, "moe xprofile", p, err, 0.13701972961425785, SourceEmpirical)
	a := args(MoEBF16)
	a.Inter = 1600
	p, err = h.MoE(a, 96)
	qtNear(t, "moe xshape", p, err, 0.14427836344943168, SourceEmpirical)
	p, err = h.WithTransferPolicy(TransferPolicy{XShape: true}).MoE(a, 96)
	qtNear(t, "moe xshape conservative", p, err, 0.14427836344943168, SourceEmpirical)
}

func TestQueryRulesH200(t *testing.T) {
	q := qtQuerier(t, "h200_sxm", "vllm", "0.24.0", ModeSilicon)
	// Prefix correction: the table is read at full_s = s + prefix and scaled
	// by (full² − prefix²)/full², i.e. a prefixed query is the full-sequence
	// query times that factor.
	full, err := q.ContextAttention(2, 6000, 0, 8, 1, 128, 0, KVBF16, FMHABF16)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := q.ContextAttention(2, 2000, 4000, 8, 1, 128, 0, KVBF16, FMHABF16)
	if err != nil {
		t.Fatal(err)
	}
	approxRel(t, "prefix correction", pre.LatencyMs, full.LatencyMs*(6000.0*6000-4000*4000)/(6000*6000))

	// Decode: the 5-point average over ±10 % of s. Where the five samples sit
	// on one linear segment of the table the average equals the value at
	// their mean; at s = 1 all samples coincide.
	one, err := q.GenerationAttention(8, 1, 8, 1, 128, 0, KVBF16)
	if err != nil || !(one.LatencyMs > 0) {
		t.Fatalf("s=1: %+v %v", one, err)
	}

	// All-reduce beyond the node: the TP8 curve scaled by
	// (tp−1)/tp · N/(N−1) · bw(N)/bw(tp).
	a8, err := q.CustomAllReduce(CommHalf, 8, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	a16, err := q.CustomAllReduce(CommHalf, 16, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	approxRel(t, "all-reduce tp16", a16.LatencyMs, a8.LatencyMs*(15.0/16)*(8.0/7)*(450e9/50e9))

	// fp8_static GEMM: fp8 table minus compute_scale (minus scale_matrix for
	// low-precision inputs), floored at SOL, tagged estimated.
	base, err := q.Gemm(GemmFP8, 4096, 5120, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := q.ComputeScale(GemmFP8Static, 4096, 4096)
	if err != nil {
		t.Fatal(err)
	}
	sm, err := q.ScaleMatrix(GemmFP8Static, 4096, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := q.WithMode(ModeSOL)
	floor, _ := s.Gemm(GemmFP8Static, 4096, 5120, 4096)
	for _, lp := range []bool{false, true} {
		op, err := q.GemmOp(GemmFP8Static, 4096, 5120, 4096, lp)
		if err != nil {
			t.Fatal(err)
		}
		want := base.LatencyMs - cs.LatencyMs
		if lp {
			want -= sm.LatencyMs
		}
		approxRel(t, "fp8_static", op.LatencyMs, math.Max(want, floor.LatencyMs))
		if op.Source != SourceEstimated {
			t.Errorf("fp8_static source %v, want estimated", op.Source)
		}
	}
}

func TestQueryConcurrent(t *testing.T) {
	// One querier shared by goroutines (empirical grids built lazily under
	// the cache lock) answers exactly what a serial caller gets.
	base := qtQuerier(t, "b200_sxm", "vllm", "0.19.0", ModeHybrid)
	q := base.WithTransferPolicy(AllTransfers)
	ask := func(i int) float64 {
		var p Perf
		var err error
		switch i % 4 {
		case 0:
			p, err = q.Gemm(GemmInt4WO, 64+i, 4096, 4096)
		case 1:
			p, err = q.ContextAttention(4, 4096+i, 0, 48, 8, 192, 0, KVFP8, FMHABF16)
		case 2:
			p, err = q.GenerationAttention(16, 4096+i, 48, 8, 192, 0, KVFP8)
		default:
			p, err = q.MoE(MoEArgs{Quant: MoEW4AFP8, Distribution: "power_law_1.2", TopK: 8, NumExperts: 128,
				Hidden: 4096, Inter: 1536, MoETP: 1, MoEEP: 8, IsGated: true}, 96+i)
		}
		if err != nil {
			t.Errorf("query %d: %v", i, err)
		}
		return p.LatencyMs
	}
	const n = 64
	var par [n]float64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			par[i] = ask(i)
		}(i)
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		if s := ask(i); s != par[i] {
			t.Errorf("query %d: concurrent %v, serial %v", i, par[i], s)
		}
	}
}
