package queueing

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenPoint is one fixed operating point of the golden files.
type goldenPoint struct {
	name string
	w    workload.Spec
	mod  func(*engine.Spec)
	be   engine.Backend
}

var goldenTiming = timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 1e-5}

func goldenPoints() []goldenPoint {
	return []goldenPoint{
		{"vllm_c1", workload.Spec{ISL: 4096, OSL: 256, Concurrency: 1}, nil, engine.VLLM},
		{"vllm_c32_budget8192", workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}, nil, engine.VLLM},
		{"vllm_sync_prefix_turnaround", workload.Spec{ISL: 2000, OSL: 500, Prefix: 512, Concurrency: 64, TurnaroundMs: 50},
			func(e *engine.Spec) { e.AsyncScheduling = false; e.MaxNumBatchedTokens = 2048 }, engine.VLLM},
		{"vllm_chunked_off", workload.Spec{ISL: 1024, OSL: 64, Concurrency: 16},
			func(e *engine.Spec) { e.EnableChunkedPrefill = false; e.MaxNumBatchedTokens = 4096 }, engine.VLLM},
		{"vllm_seqs_capped", workload.Spec{ISL: 1500, OSL: 100, Concurrency: 24},
			func(e *engine.Spec) { e.MaxNumSeqs = 8 }, engine.VLLM},
		{"vllm_threshold_stage", workload.Spec{ISL: 6000, OSL: 80, Concurrency: 12},
			func(e *engine.Spec) { e.LongPrefillTokenThreshold = 1024; e.StageMs = 12 }, engine.VLLM},
		{"vllm_open_w1", workload.Spec{ISL: 1024, OSL: 128, RateRPS: 6, NumRequests: 2000}, nil, engine.VLLM},
		{"vllm_w2_strata", workload.Spec{ISL: 2048, OSL: 200, Concurrency: 16,
			ISLQuantiles: []int{512, 1024, 2048, 3072, 4096}, OSLQuantiles: []int{50, 150, 200, 250, 350}}, nil, engine.VLLM},
		{"vllm_open_unstable", workload.Spec{ISL: 4096, OSL: 256, RateRPS: 50, NumRequests: 1000}, nil, engine.VLLM},
		{"trtllm_c32", workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}, nil, engine.TRTLLM},
		{"trtllm_chunked_kv", workload.Spec{ISL: 3000, OSL: 300, Prefix: 500, Concurrency: 16},
			func(e *engine.Spec) {
				e.EnableChunkedPrefill = true
				e.MaxNumTokens = 2048
				e.KVCapacityTokens = 4 * 3328
			}, engine.TRTLLM},
		{"sglang_mixed_c32", workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}, nil, engine.SGLang},
		{"sglang_alternating", workload.Spec{ISL: 3000, OSL: 120, Concurrency: 16},
			func(e *engine.Spec) { e.EnableMixedChunk = false; e.ChunkedPrefillSize = 2048 }, engine.SGLang},
		{"sglang_open_osl1", workload.Spec{ISL: 2048, OSL: 1, RateRPS: 3, NumRequests: 1500}, nil, engine.SGLang},
	}
}

// TestGolden: both tiers of a dozen fixed points against testdata/golden (-update
// rewrites them). Floats compare to 1e-9 relative (portable across FMA).
func TestGolden(t *testing.T) {
	for _, g := range goldenPoints() {
		t.Run(g.name, func(t *testing.T) {
			e := testEngine(t, g.be, g.mod)
			got := map[string]any{"workload": g.w, "engine": e}
			for _, tier := range []Tier{TierScreening, TierQuantitative} {
				var r *Report
				var err error
				if tier == TierScreening {
					r, err = Screening(g.w, e, goldenTiming)
				} else {
					r, err = Quantitative(context.Background(), g.w, e, goldenTiming)
				}
				if err != nil {
					t.Fatal(err)
				}
				got[string(tier)] = r.Columns(1)
			}
			b, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", g.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run Golden -update)", err)
			}
			var gv, wv any
			if err := json.Unmarshal(b, &gv); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &wv); err != nil {
				t.Fatal(err)
			}
			diffJSON(t, "", wv, gv)
		})
	}
}

// diffJSON reports every difference between want and got (floats to 1e-9).
func diffJSON(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: got %v, want an object", path, got)
			return
		}
		for k := range w {
			diffJSON(t, path+"."+k, w[k], g[k])
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				t.Errorf("%s.%s: unexpected key", path, k)
			}
		}
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: got %v, want %v", path, got, w)
		}
	default:
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if string(wb) != string(gb) {
			t.Errorf("%s: got %s, want %s", path, gb, wb)
		}
	}
}
