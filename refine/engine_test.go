package refine

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
)

// TestEnumerateEngineProfiles: every point records its engine; the defaults
// profile keeps the original rule and keys, aiconfigurator deploys each agg
// point by the generator rules (budget b + isl + 1500, rounded to 32 on TRT-LLM)
// and keys on it, and a config file is applied over the profile on every point.
func TestEnumerateEngineProfiles(t *testing.T) {
	ctx := context.Background()
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "trtllm", TotalGPUs: 8, ISL: 1000, OSL: 200,
		TPs: []int{2}, Batches: []int{8, 64}, CtxTokens: []int{1000, 2000}, Modes: []string{"agg", "disagg"},
		DecodeBatches: []int{16}, MaxWorkers: 1}
	r, err := Synthetic{}.Resolve(ctx, spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := Enumerate(spec, r, "e")
	if err != nil {
		t.Fatal(err)
	}
	spec.EngineProfile = queueing.ProfileAIConfigurator
	aic, err := Enumerate(spec, r, "e")
	if err != nil {
		t.Fatal(err)
	}
	if len(aic) != len(legacy) || len(aic) == 0 {
		t.Fatalf("%d vs %d points", len(aic), len(legacy))
	}
	for i := range aic {
		l, a := legacy[i], aic[i]
		rl, ok, err := engineconf.DecodeResolved(l.Engine)
		if err != nil || !ok || rl.Profile != queueing.ProfileDefaults || l.EngineProfile != "" {
			t.Fatalf("legacy point %d: %q %v", i, l.Engine, err)
		}
		ra, ok, err := engineconf.DecodeResolved(a.Engine)
		if err != nil || !ok || ra.Profile != queueing.ProfileAIConfigurator || a.EngineProfile != queueing.ProfileAIConfigurator {
			t.Fatalf("aic point %d: %q %v", i, a.Engine, err)
		}
		if l.Key() == a.Key() {
			t.Fatalf("point %d: the profiles share a key", i)
		}
		if a.Mode == store.ModeDisagg {
			if ra.Prefill == nil || ra.Decode == nil || ra.Prefill.MaxBatchSize != 1 || ra.Prefill.AsyncScheduling ||
				ra.Prefill.MaxNumTokens != 2528 || ra.Decode.MaxBatchSize != 16 || ra.Decode.MaxNumTokens != 32 {
				t.Fatalf("disagg engines %+v / %+v", ra.Prefill, ra.Decode)
			}
			continue
		}
		want := (a.Batch + 1000 + 1500 + 31) / 32 * 32
		e := ra.Engine
		if e.MaxNumTokens != want || e.MaxBatchSize != a.Batch || e.EnableChunkedPrefill || !e.AsyncScheduling ||
			a.MaxNumBatchedTokens != want || a.MaxNumSeqs != a.Batch || a.ChunkedPrefill {
			t.Fatalf("agg b%d: engine %+v, columns %d/%d", a.Batch, e, a.MaxNumBatchedTokens, a.MaxNumSeqs)
		}
		// The original rule: budget ctx_tokens + batch.
		if rl.Engine.MaxNumTokens != l.CtxTokens+l.Batch {
			t.Fatalf("legacy engine %+v", rl.Engine)
		}
		got, err := pointEngine(a)
		if err != nil || got != *e {
			t.Fatalf("evaluator engine %+v, %v; recorded %+v", got, err, *e)
		}
	}

	cfg, err := engineconf.Parse("trtllm", []byte("max_num_tokens: 4096\nenable_chunked_prefill: true\nport: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec.EngineConfig = cfg
	withCfg, err := Enumerate(spec, r, "e")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range withCfg {
		rc, _, _ := engineconf.DecodeResolved(p.Engine)
		if p.EngineProfile != "aiconfigurator+config" || len(rc.Config) != 2 {
			t.Fatalf("config point: %q %+v", p.EngineProfile, rc)
		}
		if p.Mode == store.ModeAgg && (rc.Engine.MaxNumTokens != 4096 || !rc.Engine.EnableChunkedPrefill) {
			t.Fatalf("config not applied: %+v", rc.Engine)
		}
	}

	spec.EngineConfig = nil
	spec.EngineProfile = "tuned"
	if _, err := Enumerate(spec, r, "e"); err == nil || err.Error() != `--engine-profile "tuned": unknown; use defaults or aiconfigurator` {
		t.Fatalf("bad profile: %v", err)
	}
	spec.EngineProfile = ""
	spec.EngineConfig, _ = engineconf.Parse("vllm", []byte("--max-num-seqs 4"))
	if _, err := Enumerate(spec, r, "e"); err == nil || !strings.Contains(err.Error(), "read as vllm's but --backend is trtllm") {
		t.Fatalf("backend mismatch: %v", err)
	}
}

// TestSweepStoresEngineConfig: a sweep stores each row's resolved engine, and
// rereading the rows gives back the same inputs (so the funnel evaluates the
// engine that was recorded).
func TestSweepStoresEngineConfig(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	spec := defaultSpec()
	spec.EngineProfile = queueing.ProfileAIConfigurator
	res, err := Sweep(ctx, s, Synthetic{}, spec, SweepOptions{Now: fixedNow})
	if err != nil || res.Evaluated == 0 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	pts, err := s.SelectPoints(ctx, store.PointFilter{IncludeOOM: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		if p.EngineProfile != queueing.ProfileAIConfigurator || p.Key != p.PointInputs.Key() {
			t.Fatalf("row %s: profile %q, key %v", p.Key[:8], p.EngineProfile, p.Key == p.PointInputs.Key())
		}
		if _, ok, err := engineconf.DecodeResolved(p.Engine); !ok || err != nil {
			t.Fatalf("row %s: engine %q", p.Key[:8], p.Engine)
		}
	}
}

// TestPointResolved: a recorded engine is returned as recorded; a row without
// one gets the original rule's engine of its inputs.
func TestPointResolved(t *testing.T) {
	in := store.PointInputs{Model: "m", System: "h200_sxm", Backend: "vllm", Version: "0.11.0", Mode: store.ModeAgg,
		ISL: 1000, OSL: 100, TP: 1, PP: 1, DP: 1, MoETP: 1, MoEEP: 1, Batch: 8, CtxTokens: 2000, MaxNumBatchedTokens: 2008, MaxNumSeqs: 8}
	r, recorded, err := PointResolved(in)
	if err != nil || recorded || r.Profile != queueing.ProfileDefaults || r.Engine == nil ||
		r.Engine.MaxNumBatchedTokens != 2008 || r.Engine.MaxNumSeqs != 8 {
		t.Fatalf("derived: %+v %v %v", r, recorded, err)
	}
	in.Engine = `{"profile":"aiconfigurator","engine":{"backend":"vllm","max_num_batched_tokens":2508}}`
	r, recorded, err = PointResolved(in)
	if err != nil || !recorded || r.Engine.MaxNumBatchedTokens != 2508 {
		t.Fatalf("recorded: %+v %v %v", r, recorded, err)
	}
}

// TestPointEngineBatchWaitUnderADP: a TensorRT-LLM point whose recorded engine
// waits for batches (T-R6) keeps it at dp 1 and drops it under attention DP,
// where the executor never calls _waiting_requests.
func TestPointEngineBatchWaitUnderADP(t *testing.T) {
	e, err := engine.Defaults(engine.TRTLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	e.BatchWaitTimeoutIters, e.BatchWaitMaxTokensRatio = 20, 0.9
	rec, err := engineconf.Resolved{Profile: "defaults", Engine: &e}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, dp := range []int{1, 4} {
		got, err := pointEngine(store.PointInputs{Backend: string(engine.TRTLLM), DP: dp, Engine: rec})
		if err != nil {
			t.Fatal(err)
		}
		if got.BatchWaiting() != (dp == 1) {
			t.Errorf("dp %d: batch waiting %v (iters %d, ratio %v)", dp, got.BatchWaiting(), got.BatchWaitTimeoutIters, got.BatchWaitMaxTokensRatio)
		}
	}
}
