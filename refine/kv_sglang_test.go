package refine

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/store"
)

// llama70BTiming is Llama-3.1-70B fp8 (fp8 KV) on the newest embedded h200_sxm
// perf data of backend at tp.
func llama70BTiming(t *testing.T, backend string, tp int) *perfdb.PassTiming {
	t.Helper()
	vs, err := perfdb.EmbeddedVersions("h200_sxm", backend)
	if err != nil || len(vs) == 0 {
		t.Fatalf("%s versions: %v %v", backend, vs, err)
	}
	slices.SortFunc(vs, perfdb.CompareVersions)
	v := vs[len(vs)-1]
	d, err := perfdb.LoadEmbedded(context.Background(), "h200_sxm", backend, v)
	if err != nil {
		t.Fatal(err)
	}
	m, err := perfdb.EmbeddedModel("meta-llama/Meta-Llama-3.1-70B")
	if err != nil {
		t.Fatal(err)
	}
	est, err := perfdb.NewEstimator(d, m, perfdb.Config{Backend: backend, Version: v, TP: tp, PP: 1, DP: 1,
		MoETP: 1, MoEEP: 1, GemmQuant: perfdb.GemmQuant("fp8"), KVQuant: perfdb.KVFP8})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := perfdb.NewPassTiming(est)
	if err != nil {
		t.Fatal(err)
	}
	return pt
}

// sglangTestTiming is llama70BTiming on SGLang's data.
func sglangTestTiming(t *testing.T, tp int) *perfdb.PassTiming {
	t.Helper()
	return llama70BTiming(t, "sglang", tp)
}

// TestSGLangPool: an SGLang worker's KV pool is SGLang's own
// (profile_max_num_token): (capacity − NCCL − other reserves)·mem_fraction_static
// − weights, in whole pages — the same for every prompt length (activations live
// outside the fraction), larger than the memory model's budget (which takes the
// prefill's activations and a 2 % tolerance off), and with the aiconfigurator
// profile's --cuda-graph-bs 1…batch the fraction reserves 2 MiB per graph batch
// for the batch instead of the tier's 512.
func TestSGLangPool(t *testing.T) {
	pt := sglangTestTiming(t, 2)
	est := pt.Estimator()
	plan := func(in store.PointInputs) int {
		t.Helper()
		e := engine.Spec{Backend: engine.SGLang, BlockSize: 1, MaxNumSeqs: in.Batch} // the profile's max_running_requests
		if _, err := planKV(pt, in, &e); err != nil {
			t.Fatal(err)
		}
		return e.KVCapacityTokens
	}
	in := store.PointInputs{ISL: 1024, OSL: 1024, Batch: 64}
	got := plan(in)
	u, err := est.Memory(1, in.ISL, in.OSL, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	capB := est.System().MemCapacity
	f := perfdb.SGLangMemFractionStatic(capB, 2, 1, 1, 0)
	want := int(math.Floor(((capB-(u.NCCLGiB+u.OthersGiB)*(1<<30))*f - u.WeightsGiB*(1<<30)) / est.KVBytesPerToken()))
	if got != want {
		t.Fatalf("pool %d tokens, want %d", got, want)
	}
	memModel, err := est.KVCapacityTokens(in.ISL, in.OSL, 1)
	if err != nil || memModel >= got {
		t.Fatalf("memory-model budget %d (%v) should be below SGLang's pool %d", memModel, err, got)
	}
	if long := plan(store.PointInputs{ISL: 8192, OSL: 1024, Batch: 64}); long != got {
		t.Fatalf("isl 8192: pool %d, isl 1024: %d; want the same", long, got)
	}
	in.EngineProfile = queueing.ProfileAIConfigurator
	aic := plan(in)
	fa := perfdb.SGLangMemFractionStatic(capB, 2, 1, 1, 64)
	if fa <= f || aic <= got {
		t.Fatalf("cuda_graph_max_bs 64: fraction %v pool %d, tier default: %v %d; want both larger", fa, aic, f, got)
	}
	e := engine.Spec{Backend: engine.SGLang, BlockSize: 64}
	if _, err := planKV(pt, store.PointInputs{ISL: 1024, OSL: 1024, Batch: 64}, &e); err != nil || e.KVCapacityTokens != got/64*64 {
		t.Fatalf("page 64: pool %d (%v), want %d", e.KVCapacityTokens, err, got/64*64)
	}
}

// TestCUDAGraphMaxBS pins SGLang's rule: with --cuda-graph-bs given, ServerArgs
// sets cuda_graph_max_bs = max(cuda_graph_bs) before it derives
// mem_fraction_static, and aiconfigurator's rules give 1…max_batch_size. So under
// the aiconfigurator profile the graph reserve follows the rules' batch (128, the
// rules' default, when eval's open loop gives none), not max_running_requests
// after an engine config: a config that lowers it to 64 or raises it to 1024
// over a point of batch 512 leaves the reserve at 512. planKV (the sweep) and
// eval take it from the same function.
func TestCUDAGraphMaxBS(t *testing.T) {
	agg := func(b engine.Backend, batch int) queueing.ProfileInput {
		return queueing.ProfileInput{Backend: string(b), Role: queueing.RoleAgg, Batch: batch, ISL: 1024, OSL: 1024}
	}
	for _, tc := range []struct {
		profile string
		in      queueing.ProfileInput
		want    int
	}{
		{queueing.ProfileAIConfigurator, agg(engine.SGLang, 512), 512},
		{queueing.ProfileAIConfigurator + "+config", agg(engine.SGLang, 512), 512},
		{queueing.ProfileAIConfigurator, agg(engine.SGLang, 0), 128},
		{queueing.ProfileDefaults, agg(engine.SGLang, 512), 0},
		{queueing.ProfileDefaults + "+config", agg(engine.SGLang, 512), 0},
		{"", agg(engine.SGLang, 512), 0},
		{queueing.ProfileAIConfigurator, agg(engine.VLLM, 512), 0},
	} {
		if got, err := CUDAGraphMaxBS(tc.profile, tc.in); err != nil || got != tc.want {
			t.Errorf("CUDAGraphMaxBS(%q, %s batch %d) = %d, %v; want %d", tc.profile, tc.in.Backend, tc.in.Batch, got, err, tc.want)
		}
	}
	pt := sglangTestTiming(t, 2)
	want, err := KVPoolTokens(pt.Estimator(), engine.Spec{Backend: engine.SGLang, BlockSize: 1}, 1024, 1024, 512)
	if err != nil {
		t.Fatal(err)
	}
	for _, seats := range []int{64, 512, 1024} { // the config's max_running_requests
		e := engine.Spec{Backend: engine.SGLang, BlockSize: 1, MaxNumSeqs: seats}
		in := store.PointInputs{ISL: 1024, OSL: 1024, Batch: 512, EngineProfile: queueing.ProfileAIConfigurator + "+config"}
		if _, err := planKV(pt, in, &e); err != nil {
			t.Fatal(err)
		}
		if e.KVCapacityTokens != want {
			t.Errorf("max_running_requests %d: planKV pool %d tokens, want %d (cuda_graph_max_bs 512, the rules' batch)", seats, e.KVCapacityTokens, want)
		}
	}
	byCap, err := KVPoolTokens(pt.Estimator(), engine.Spec{Backend: engine.SGLang, BlockSize: 1}, 1024, 1024, 64)
	if err != nil || byCap <= want {
		t.Fatalf("cuda_graph_max_bs 64: pool %d (%v); want more than 512's %d (the reserve must matter here)", byCap, err, want)
	}
}
