package calibrate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store/measure"
)

// gapSource is a PerfSource with one system and backend and the given versions.
type gapSource struct{ versions []string }

func (g gapSource) Systems(context.Context) ([]string, error)          { return []string{"s"}, nil }
func (g gapSource) Backends(context.Context, string) ([]string, error) { return []string{"vllm"}, nil }
func (g gapSource) Versions(context.Context, string, string) ([]string, error) {
	return g.versions, nil
}
func (g gapSource) Data(context.Context, string, string, string, ...perfdb.LoadOption) (*perfdb.Data, error) {
	return nil, fmt.Errorf("not used")
}
func (g gapSource) Model(context.Context, string) (*perfdb.Model, error) {
	return nil, fmt.Errorf("not used")
}

// gapEval resolves a model at the versions in ok and misses (a perf-data gap) or
// fails otherwise.
type gapEval struct {
	linearEval
	ok   map[string]bool
	hard bool // fail with an error that is not a perf-data gap
}

func (g gapEval) Resolve(_ context.Context, _, _, _, v string) (refine.Resolved, error) {
	switch {
	case g.ok[v]:
		return refine.Resolved{Version: v, DatabaseMode: "SILICON", GemmQuant: "fp8", KVCacheQuant: "fp8",
			FMHAQuant: "bfloat16", MoEQuant: "bfloat16", CommQuant: "half", Heads: 8, KVHeads: 8}, nil
	case g.hard:
		return refine.Resolved{}, fmt.Errorf("model config unreadable at %s", v)
	}
	return refine.Resolved{}, fmt.Errorf("legacy estimate: attention table missing (s vllm %s): %w", v, refine.ErrNoPerfData)
}

// TestResolveFallsBack: a version that cannot resolve the model for want of perf
// data is passed over for the next fallback version, nearest first, only with
// VersionFallback; each step is in the mapping. An error that is not a gap stops
// at the mapped version.
func TestResolveFallsBack(t *testing.T) {
	row := measure.Row{ID: 1, Measurement: measure.Measurement{Deployment: measure.Deployment{Model: "m/x", System: "s",
		Backend: "vllm", Version: "0.20.0", Mode: "agg", TP: 1, PP: 1, DP: 1, MoETP: 1, MoEEP: 1, ISL: 128, OSL: 16}, Concurrency: 2}}
	src := gapSource{versions: []string{"0.19.0", "0.22.0", "0.24.0"}}
	res := func(ok map[string]bool, fallback, hard bool) *Resolver {
		return &Resolver{Src: src, Ev: gapEval{ok: ok, hard: hard}, Profile: ProfileDefaults, VersionFallback: fallback, models: []string{"m/x"}}
	}
	ctx := context.Background()
	// 0.20.0 maps to 0.19.0 (newest below); 0.22.0 is the nearest fallback.
	tg := res(map[string]bool{"0.24.0": true}, true, false).Resolve(ctx, row)
	want := "0.20.0 → 0.19.0 (newest below); no perf data at 0.19.0 (attention table missing (s vllm 0.19.0)) → 0.22.0; " +
		"no perf data at 0.22.0 (attention table missing (s vllm 0.22.0)) → 0.24.0"
	if tg.Reason != "" || tg.VersionUsed != "0.24.0" || tg.VersionMapping != want || !tg.FellBack() || tg.In.Version != "0.24.0" {
		t.Errorf("fallback: version %s, mapping %q, reason %q, fell back %v, point version %s\nwant 0.24.0, %q",
			tg.VersionUsed, tg.VersionMapping, tg.Reason, tg.FellBack(), tg.In.Version, want)
	}
	// Without the flag the miss is the reason, at the mapped version.
	tg = res(map[string]bool{"0.24.0": true}, false, false).Resolve(ctx, row)
	if !strings.Contains(tg.Reason, "no perf data for this point") || tg.VersionUsed != "0.19.0" || tg.FellBack() {
		t.Errorf("no fallback: version %s, reason %q, fell back %v", tg.VersionUsed, tg.Reason, tg.FellBack())
	}
	// No version has the data: the last version's miss is the reason.
	tg = res(nil, true, false).Resolve(ctx, row)
	if !strings.Contains(tg.Reason, "(s vllm 0.24.0)") || tg.VersionUsed != "0.24.0" {
		t.Errorf("all miss: version %s, reason %q", tg.VersionUsed, tg.Reason)
	}
	// An error that is not a gap is not retried elsewhere.
	tg = res(map[string]bool{"0.24.0": true}, true, true).Resolve(ctx, row)
	if tg.Reason != "model config unreadable at 0.19.0" || tg.VersionUsed != "0.19.0" || tg.FellBack() {
		t.Errorf("hard error: version %s, reason %q", tg.VersionUsed, tg.Reason)
	}
}
