package refine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/quick"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// kvTightSweep sweeps Qwen3-32B on h200_sxm with SGLang at tp 2, isl 4000, osl 500
// and a 150000-token KV pool (the engine's own --max-total-tokens): batch 32 needs
// 144000 tokens at full length and fits; batch 64 needs 288000, retracts (S-R5)
// and has the highest legacy tokens/s/gpu.
func kvTightSweep(t *testing.T) (*store.Store, *PerfdbEvaluator) {
	t.Helper()
	if testing.Short() {
		t.Skip("real perf data sweep (~5 s)")
	}
	src := sharedSource(t)
	cfg, err := engineconf.Parse("sglang", []byte("--max-total-tokens 150000\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	ev := NewPerfdbEvaluator(src)
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "sglang", TotalGPUs: 2, ISL: 4000, OSL: 500,
		TPs: []int{2}, Batches: []int{16, 32, 64}, CtxTokens: []int{4000}, EngineConfig: cfg}
	res, err := Sweep(context.Background(), s, ev, spec, SweepOptions{Now: fixedNow})
	if err != nil || res.KVTight != 1 || res.Preempting != 1 {
		t.Fatalf("sweep: %+v %v: want 1 KV-tight row, preempting", res, err)
	}
	return s, ev
}

// TestKVTightSweep: the sweep prices every point with its KV pool; the KV-tight
// batch-64 row gets no certain bracket at screening tier, its quantitative tier is
// stored with it and shows retraction, so it is off the pareto front (the `pareto`
// view) while `pareto_all` lists it flagged; the rows that fit carry the screening
// bound (no preemption, utilisation = demand / pool). best skips the preempting
// row unless AllowPreemption; doctor checks the KV columns.
func TestKVTightSweep(t *testing.T) {
	s, ev := kvTightSweep(t)
	ctx := context.Background()
	pts, err := s.SelectPoints(ctx, store.PointFilter{})
	if err != nil || len(pts) != 3 {
		t.Fatalf("%d rows, %v", len(pts), err)
	}
	byBatch := map[int]store.Point{}
	for _, p := range pts {
		byBatch[p.Batch] = p
	}
	b64, b32 := byBatch[64], byBatch[32]
	if b64.Q.Tier != store.TierQuantitative || !b64.Q.KV.Preempts() || b64.Q.HiCertain || b64.IsPareto ||
		b64.Q.KV.CapacityTokens != 150000 || b64.Q.KV.UtilPeak != 1 {
		t.Fatalf("batch 64: tier %s, KV %+v, certain %v, pareto %v: want quantitative, preempting, uncertain, off the front",
			b64.Q.Tier, b64.Q.KV, b64.Q.HiCertain, b64.IsPareto)
	}
	if b64.Legacy.TokensPerSPerGPU <= b32.Legacy.TokensPerSPerGPU {
		t.Fatalf("batch 64 should win on tokens/s/gpu without KV pressure: %v ≤ %v", b64.Legacy.TokensPerSPerGPU, b32.Legacy.TokensPerSPerGPU)
	}
	if b32.Q.Tier != store.TierScreening || !b32.IsPareto || b32.Q.KV.Preempts() || !b32.Q.KV.HasPreemptions ||
		b32.Q.KV.UtilPeak != 144000.0/150000 || !strings.HasPrefix(b32.Q.KV.Note, "screening: ") {
		t.Fatalf("batch 32: %+v pareto %v: want the screening bound 0.96, no preemption, on the front", b32.Q.KV, b32.IsPareto)
	}
	var flagged []struct {
		Batch    int `db:"batch"`
		Preempts int `db:"preempts"`
	}
	if err := storetest.DB(t, s).SelectContext(ctx, &flagged, `SELECT batch, preempts FROM pareto_all ORDER BY batch`); err != nil {
		t.Fatal(err)
	}
	if len(flagged) == 0 || flagged[len(flagged)-1].Batch != 64 || flagged[len(flagged)-1].Preempts != 1 {
		t.Fatalf("pareto_all = %+v: want batch 64 flagged preempts = 1", flagged)
	}
	var n int
	if err := storetest.DB(t, s).GetContext(ctx, &n, `SELECT count(*) FROM pareto WHERE preempts = 1`); err != nil || n != 0 {
		t.Fatalf("pareto holds %d preempting rows (%v)", n, err)
	}

	// best leaves the preempting batch-64 row out (it would rank first) and counts
	// it; AllowPreemption ranks it first, flagged by its KV.
	res, err := Best(ctx, s, ev, BestOptions{TopK: 1})
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("best: %+v %v", res, err)
	}
	if res.Rows[0].Batch != 32 || res.Preempting != 1 {
		t.Fatalf("best: batch %d, %d preempting left out: want batch 32 and 1", res.Rows[0].Batch, res.Preempting)
	}
	res, err = Best(ctx, s, ev, BestOptions{TopK: 1, AllowPreemption: true})
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("best --allow-preemption: %+v %v", res, err)
	}
	if p := res.Rows[0]; p.Batch != 64 || !p.Q.KV.Preempts() || res.Preempting != 0 {
		t.Fatalf("best --allow-preemption: batch %d KV %+v, %d left out: want batch 64 flagged", p.Batch, p.Q.KV, res.Preempting)
	}

	// doctor re-evaluates the stored quantitative row, KV columns included (with
	// the sweep's evaluator: its caches hold perf data only, not results).
	fresh := func() (Evaluator, error) { return ev, nil }
	rep, err := Doctor(ctx, s, fresh, DoctorOptions{All: true})
	if err != nil || rep.Checked != 1 || len(rep.Mismatches) != 0 {
		t.Fatalf("doctor: %+v %v: want 1 row checked, no mismatch", rep, err)
	}
	if _, err := storetest.DB(t, s).ExecContext(ctx, `UPDATE quantitative_results SET preemptions_per_request = 0.5`); err != nil {
		t.Fatal(err)
	}
	rep, err = Doctor(ctx, s, fresh, DoctorOptions{All: true})
	if err != nil || len(rep.Mismatches) != 1 || rep.Mismatches[0].Column != "preemptions_per_request" || rep.Mismatches[0].Stored != 0.5 {
		t.Fatalf("doctor after tampering: %+v %v: want the preemptions_per_request mismatch", rep, err)
	}
}

// TestKVScreeningNotCertainWhenTight: a KV-tight point's screening row never
// claims a certain bracket and leaves the preemption count unknown (the closed
// form has no preemption), so an SLA decision on it needs the quantitative tier;
// a point whose demand fits keeps the certainty the closed form gives.
func TestKVScreeningNotCertainWhenTight(t *testing.T) {
	tight := kvPlan{capTokens: 150000, capBlocks: 150000, perReq: 4500, demandBlocks: 288000, tight: true, perPass: true}
	kv, certain := tight.screening()
	if certain || kv.HasPreemptions || kv.HasUtil || kv.CapacityTokens != 150000 || !strings.Contains(kv.Note, "KV-tight") {
		t.Fatalf("tight: %+v certain %v", kv, certain)
	}
	noEvict := tight
	noEvict.perPass = false // TRT-LLM GUARANTEED_NO_EVICT: admission-limited, never evicts
	kv, certain = noEvict.screening()
	if !certain || !kv.HasPreemptions || kv.PreemptionsPerRequest != 0 || kv.UtilPeak != float64(33*4500)/150000 {
		t.Fatalf("no-evict: %+v certain %v", kv, certain)
	}
	fits := kvPlan{capTokens: 150000, capBlocks: 150000, perReq: 4500, demandBlocks: 144000, perPass: true}
	kv, certain = fits.screening()
	if !certain || !kv.HasPreemptions || kv.UtilPeak != 0.96 {
		t.Fatalf("fits: %+v certain %v", kv, certain)
	}
}

// kvOOM is the synthetic evaluator whose workers cannot hold one request's KV
// (the memory model's ErrOOM, as planKV returns it).
type kvOOM struct{ Synthetic }

const kvOOMArith = "vllm KV budget 141.00 GiB × 0.92 × 0.98 − (weights 120.00 + activations 4.00 + nccl 0.00 + others 3.00 GiB) = -0.88 GiB per GPU < the KV of one request of isl 4000 + osl 500 (0.69 GiB) on h200_sxm tp 1; raise --tp/--pp or shorten the request"

func (kvOOM) Screen(context.Context, store.PointInputs) (store.Queueing, error) {
	return store.Queueing{}, fmt.Errorf("agg tp1pp1dp1etp1ep1 b8: %w: %s", perfdb.ErrOOM, kvOOMArith)
}

// TestSweepKVOOM: a point whose weights + one request's KV do not fit is stored as
// an OOM row, counted as OOM, its kv_note carrying the memory arithmetic.
func TestSweepKVOOM(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	spec := defaultSpec()
	spec.TPs, spec.Batches, spec.CtxTokens = []int{1}, []int{8}, []int{4000}
	res, err := Sweep(ctx, s, kvOOM{}, spec, SweepOptions{Now: fixedNow})
	if err != nil || res.Evaluated != 1 || res.OOM != 1 {
		t.Fatalf("sweep: %+v %v: want 1 row, OOM", res, err)
	}
	pts, err := s.SelectPoints(ctx, store.PointFilter{IncludeOOM: true})
	if err != nil || len(pts) != 1 {
		t.Fatalf("%d rows, %v", len(pts), err)
	}
	p := pts[0]
	if want := "oom: agg tp1pp1dp1etp1ep1 b8: out of memory: " + kvOOMArith; !p.Legacy.OOM || p.Q.Valid || p.Q.KV.Note != want {
		t.Fatalf("row: oom %v, valid %v, note %q\nwant note %q", p.Legacy.OOM, p.Q.Valid, p.Q.KV.Note, want)
	}
}

// BenchmarkEvaluateRowKVTight prices the KV-tight batch-64 point of kvTightSweep
// (legacy, screening and the quantitative tier with SGLang retraction), perf data
// loaded.
func BenchmarkEvaluateRowKVTight(b *testing.B) {
	src := sharedSource(b)
	ctx := context.Background()
	cfg, err := engineconf.Parse("sglang", []byte("--max-total-tokens 150000\n"))
	if err != nil {
		b.Fatal(err)
	}
	ev := NewPerfdbEvaluator(src)
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "sglang", TotalGPUs: 2, ISL: 4000, OSL: 500,
		TPs: []int{2}, Batches: []int{64}, CtxTokens: []int{4000}, EngineConfig: cfg}
	r, err := ev.Resolve(ctx, spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		b.Fatal(err)
	}
	pts, err := Enumerate(spec, r, ev.Name())
	if err != nil || len(pts) != 1 {
		b.Fatalf("%d points, %v", len(pts), err)
	}
	if _, q, err := EvaluateRow(ctx, ev, pts[0]); err != nil || q == nil || !q.KV.Preempts() {
		b.Fatalf("warm-up: %v, %+v", err, q)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		forgetQuantitative(ev) // the simulation, not its reuse
		if _, _, err := EvaluateRow(ctx, ev, pts[0]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestKVQuantitativeEngineWithPrefix: a cached prefix under a per-pass engine's KV
// pressure has no quantitative tier (the calendars do not model shared prefix
// blocks: ErrNoQuantitative, the row keeps its uncertain screening bracket); a
// point with a prefix that fits runs without its pool and reports the screening
// bound.
func TestKVQuantitativeEngineWithPrefix(t *testing.T) {
	e := engine.Spec{Backend: engine.VLLM, BlockSize: 16, KVCapacityTokens: 160000}
	tight := kvPlan{capTokens: 160000, capBlocks: 10000, perReq: 282, demandBlocks: 18048, tight: true, perPass: true}
	if _, err := tight.quantitativeEngine(e, 512); !errors.Is(err, ErrNoQuantitative) || !strings.Contains(err.Error(), "cached prefix of 512 tokens") {
		t.Fatalf("tight with prefix: %v", err)
	}
	if got, err := tight.quantitativeEngine(e, 0); err != nil || got.KVCapacityTokens != 160000 {
		t.Fatalf("tight without prefix: %+v %v: want the pool kept", got, err)
	}
	fits := kvPlan{capTokens: 160000, capBlocks: 10000, perReq: 282, demandBlocks: 9024, perPass: true}
	got, err := fits.quantitativeEngine(e, 512)
	if err != nil || got.KVCapacityTokens != 0 {
		t.Fatalf("fits with prefix: %+v %v: want no pool", got, err)
	}
	kv := fits.quantitative(nil, false)
	if !kv.HasPreemptions || kv.PreemptionsPerRequest != 0 || kv.UtilPeak != 0.9024 || kv.CapacityTokens != 160000 || kv.Note != "" {
		t.Fatalf("fits with prefix: KV %+v: want the screening bound", kv)
	}
}

// TestPlanKVPoolTooSmall: a pool (here an engine config's) that cannot hold one
// request at full length is an OOM with the block arithmetic, not a sweep failure.
func TestPlanKVPoolTooSmall(t *testing.T) {
	in := store.PointInputs{ISL: 4000, OSL: 500, Batch: 8}
	e := engine.Spec{Backend: engine.VLLM, BlockSize: 16, KVCapacityTokens: 4096}
	_, err := planKV(nil, in, &e)
	want := "out of memory: the KV pool of 4096 tokens (256 blocks of 16) cannot hold one request of isl 4000 + osl 500 (282 blocks); raise the pool or shorten the request"
	if !errors.Is(err, perfdb.ErrOOM) || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	e.KVCapacityTokens = 4512
	if k, err := planKV(nil, in, &e); err != nil || !k.tight || k.capBlocks != 282 || k.demandBlocks != 8*282 {
		t.Fatalf("one request fits: %+v %v", k, err)
	}
}

// TestKVTightIsKVHeld: a pool is KV-tight for a batch exactly when the batch
// needs more blocks than the pool has (batch·⌈(isl+osl)/bs⌉ > ⌊cap/bs⌋), i.e.
// when it exceeds the requests the pool holds at full length (KVHeld: the
// most requests whose blocks fit — one more does not).
func TestKVTightIsKVHeld(t *testing.T) {
	f := func(capT, bsR, batchR, islR, oslR uint16) bool {
		bs, batch, isl, osl := int(bsR%64)+1, int(batchR%2048), int(islR), int(oslR%8192)+1
		capTokens, per := int(capT)*64, (isl+osl+bs-1)/bs
		held := KVHeld(capTokens, bs, isl, osl)
		return KVTight(capTokens, bs, batch, isl, osl) == (batch*per > capTokens/bs) &&
			held*per <= capTokens/bs && (held+1)*per > capTokens/bs
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 20000}); err != nil {
		t.Error(err)
	}
}
