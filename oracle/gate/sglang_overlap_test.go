package gate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aicdb/aicdb/disagg"
	"github.com/aicdb/aicdb/engine"
)

// TestSGLangOverlapRandomAgainstDES: on random small SGLang closed loops — the
// overlap scheduler on and off (§3.2), mixed chunk on and off, chunked or not,
// pages of 1 or 16 tokens, some with a KV pool small enough to retract (S-R5) —
// the model and the DES agree within every gated tolerance, under both the
// product defaults and the burst semantics. Seeded: the same cases every run.
func TestSGLangOverlapRandomAgainstDES(t *testing.T) {
	n := 32
	if testing.Short() {
		n = 8
	}
	rng := rand.New(rand.NewPCG(20261204, 6))
	var fs []Family
	for i := range n {
		e, err := engine.Defaults(engine.SGLang, "")
		if err != nil {
			t.Fatal(err)
		}
		e.AsyncScheduling = i%2 == 0
		e.EnableMixedChunk = rng.IntN(2) == 0
		e.EnableChunkedPrefill = rng.IntN(4) != 0
		e.ChunkedPrefillSize = []int{256, 1024, 4096}[rng.IntN(3)]
		e.BlockSize = []int{1, 16}[rng.IntN(2)]
		e.MaxNumSeqs = []int{4, 64}[rng.IntN(2)]
		isl, osl, c := 64+rng.IntN(2048), 1+rng.IntN(48), 1+rng.IntN(12)
		if !e.EnableChunkedPrefill {
			e.MaxPrefillTokens = max(e.MaxPrefillTokens, isl)
		}
		if rng.IntN(3) == 0 { // a pool of about two thirds of the running KV: retraction
			e.KVCapacityTokens = max(c*(isl+osl)*2/3, 2*(isl+osl)) / e.BlockSize * e.BlockSize
		}
		name := fmt.Sprintf("sglang random %d: overlap %t mixed %t chunk %t/%d page %d cap %d kv %d isl %d osl %d c %d",
			i, e.AsyncScheduling, e.EnableMixedChunk, e.EnableChunkedPrefill, e.ChunkedPrefillSize, e.BlockSize,
			e.MaxNumSeqs, e.KVCapacityTokens, isl, osl, c)
		fs = append(fs, Family{Name: name, Spec: closed(isl, osl, 0, c), Engine: e, Timing: roofline})
	}
	for _, row := range Run(context.Background(), bothSemantics(fs)) {
		if row.Err != nil {
			t.Errorf("%s: %v", row.Family.Name, row.Err)
			continue
		}
		mx := 0.0
		for _, r := range row.Resid {
			mx = max(mx, r, -r)
		}
		t.Logf("%s: max residual %.2e, model ttft %.4g, DES ttft %.4g", row.Family.Name, mx, row.Model.values()[0], row.Oracle.values()[0])
		if v := verdictOf(row); v != "pass" {
			t.Errorf("%s: %s, residuals %v", row.Family.Name, v, row.Resid)
		}
	}
}

// TestSGLangOverlapDisaggAgainstDES: on random small SGLang tandems without
// batch or in-flight caps — the overlap scheduler on and off (§3.2), push and
// pull connectors — the tandem and the disaggregated DES agree on every gated
// metric within 1e-9 (relative): a prefill worker, whatever its connector, runs
// no discarded pass for a finished prompt (it has no running batch, S-R2),
// a decode worker runs one for every finished request. Seeded.
func TestSGLangOverlapDisaggAgainstDES(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for i := range 16 {
		isl, osl, c, cfg := sglangDisaggCase(t, rng, i, 1, 8)
		name := fmt.Sprintf("sglang disagg %d: overlap %t push %t isl %d osl %d c %d", i, cfg.Decode.Engine.AsyncScheduling, cfg.Push, isl, osl, c)
		requireExactDisagg(t, DisaggFamily{Name: name, Spec: closed(isl, osl, 0, c), Config: cfg})
	}
}

// TestSGLangDisaggDecodeCapAgainstDES: on random small SGLang tandems whose
// decode workers cap their running batch (Decode.BatchCap drawn in 1..6, or 0 for
// none) — the overlap scheduler on and off (§3.2), push and pull connectors — the
// tandem and the disaggregated DES agree on every gated metric within 1e-9
// (relative): a transferred request that finds max_running_requests decoders
// waits, FIFO, and joins the running batch when a seat frees (S-R2 on a decode
// server: get_new_prebuilt_batch). Seeded: the same cases every run.
func TestSGLangDisaggDecodeCapAgainstDES(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261204, 17))
	for i := range 16 {
		isl, osl, c, cfg := sglangDisaggCase(t, rng, i, 2, 10)
		cfg.Decode.BatchCap = rng.IntN(7)
		name := fmt.Sprintf("sglang disagg dcap %d: overlap %t push %t dcap %d nP %d nD %d isl %d osl %d c %d",
			i, cfg.Decode.Engine.AsyncScheduling, cfg.Push, cfg.Decode.BatchCap, cfg.Prefill.Workers, cfg.Decode.Workers, isl, osl, c)
		requireExactDisagg(t, DisaggFamily{Name: name, Spec: closed(isl, osl, 0, c), Config: cfg})
	}
}

// sglangDisaggCase draws case i of a seeded random SGLang tandem on the default
// engine: the overlap scheduler on for even i, a push connector for i mod 4 < 2,
// isl 16..1015, osl oslMin..oslMin+39, 1..cMax clients, 1–2 workers per pool and a
// 2–42 GB/s fabric.
func sglangDisaggCase(t *testing.T, rng *rand.Rand, i, oslMin, cMax int) (isl, osl, c int, cfg disagg.Config) {
	t.Helper()
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	e.AsyncScheduling = i%2 == 0
	isl, osl, c = 16+rng.IntN(1000), oslMin+rng.IntN(40), 1+rng.IntN(cMax)
	cfg = tandemConfig(1+rng.IntN(2), 1+rng.IntN(2), e, 2+rng.Float64()*40)
	cfg.Push = i%4 < 2
	return isl, osl, c, cfg
}

// requireExactDisagg runs f on both sides and reports every gated metric whose
// residual exceeds 1e-9 (relative).
func requireExactDisagg(t *testing.T, f DisaggFamily) {
	t.Helper()
	requireExactRow(t, RunDisaggFamily(context.Background(), f))
}

// requireExactRow requires every metric of a tandem-vs-DES row within 1e-9
// (relative).
func requireExactRow(t *testing.T, row DisaggRow) {
	t.Helper()
	if row.Err != nil {
		t.Errorf("%s: %v", row.Family.Name, row.Err)
		return
	}
	for k, res := range row.Resid {
		if !(math.Abs(res) <= 1e-9) {
			t.Errorf("%s: %s model %v, DES %v (residual %v)", row.Family.Name, metricNames[k], row.Model.values()[k], row.Oracle.values()[k], res)
		}
	}
}
