package main

import (
	"context"
	"flag"
	"slices"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/refine"
)

// TestReplayKVCapacityAutoSGLang: trace replay's --kv-capacity-tokens auto sizes
// an SGLang engine's pool by SGLang's own rule (refine.KVPoolTokens →
// SGLangKVPoolTokens), as eval does — not the generic memory-model budget it got
// when the engine passed to resolveKVCapacity had no backend.
func TestReplayKVCapacityAutoSGLang(t *testing.T) {
	vs, err := perfdb.EmbeddedVersions("h200_sxm", "sglang")
	if err != nil || len(vs) == 0 {
		t.Fatalf("sglang versions: %v %v", vs, err)
	}
	slices.SortFunc(vs, perfdb.CompareVersions)
	d, err := perfdb.LoadEmbedded(context.Background(), "h200_sxm", "sglang", vs[len(vs)-1])
	if err != nil {
		t.Fatal(err)
	}
	m, err := perfdb.EmbeddedModel("meta-llama/Meta-Llama-3.1-70B")
	if err != nil {
		t.Fatal(err)
	}
	est, err := perfdb.NewEstimator(d, m, perfdb.Config{Backend: "sglang", Version: vs[len(vs)-1], TP: 2, PP: 1, DP: 1,
		MoETP: 1, MoEEP: 1, GemmQuant: perfdb.GemmQuant("fp8"), KVQuant: perfdb.KVFP8})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := perfdb.NewPassTiming(est)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.String("kv-capacity-tokens", "", "")
	if err := fs.Set("kv-capacity-tokens", "auto"); err != nil {
		t.Fatal(err)
	}
	c := cli.NewContext(cli.NewApp(), fs, nil)
	w := workload.Spec{ISL: 2000, OSL: 300}
	eng := engine.Spec{Backend: engine.SGLang, BlockSize: 1, ChunkedPrefillSize: 8192, EnableChunkedPrefill: true, MaxPrefillTokens: 16384, MaxNumSeqs: 64}
	if err := replayKVCapacity(c, pt, w, &eng); err != nil {
		t.Fatal(err)
	}
	want, err := refine.KVPoolTokens(est, engine.Spec{Backend: engine.SGLang, BlockSize: 1}, w.ISL, w.OSL, 0)
	if err != nil {
		t.Fatal(err)
	}
	generic, err := est.KVCapacityTokens(w.ISL, w.OSL, 1)
	if err != nil || generic == want {
		t.Fatalf("the memory model's %d (%v) must differ from SGLang's %d for this test to tell them apart", generic, err, want)
	}
	if eng.KVCapacityTokens != want {
		t.Errorf("replay pool %d tokens, want SGLang's %d (the generic budget is %d)", eng.KVCapacityTokens, want, generic)
	}
}
