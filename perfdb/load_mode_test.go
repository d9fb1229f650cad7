package perfdb

// load_mode_test.go checks that loads follow aiconfigurator's per-mode shared
// layer (perf_database.py _shared_layer_enabled, source_resolution.rs
// resolve_one): SILICON, HYBRID and no mode load the union of sources,
// EMPIRICAL and SOL the requested version's own files only, NCCL always.

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// channelsOf returns the distinct channels of d's sources.
func channelsOf(d *Data) map[string]bool {
	out := map[string]bool{}
	for _, s := range d.Sources {
		out[s.Channel] = true
	}
	return out
}

func TestSharedLayerEnabledPerMode(t *testing.T) {
	want := map[DatabaseMode]bool{"": true, ModeSilicon: true, ModeHybrid: true, ModeEmpirical: false, ModeSOL: false}
	for m, on := range want {
		if got := SharedLayerEnabled(m); got != on {
			t.Errorf("SharedLayerEnabled(%q) = %v, want %v", m, got, on)
		}
	}
}

func TestLoadModeFixtureSources(t *testing.T) {
	root := buildFixture(t)
	ctx := context.Background()
	// Shared layer on: the precedence of TestLoadDirSharedLayerPrecedence.
	union := map[string][]string{
		"gemm_perf":              {"primary:vllm/0.10.0", "reuse:vllm/0.11.0", "earlier:vllm/0.10.0rc1", "earlier:vllm/0.9.0", "manifest:trtllm/1.0.0"},
		"context_attention_perf": {"primary:vllm/0.10.0", "reuse:vllm/0.11.0"},
		"custom_allreduce_perf":  {"earlier:vllm/0.10.0rc1", "earlier:vllm/0.9.0"},
		"nccl_perf":              {"nccl:nccl/2.26.2"},
		"moe_perf":               {"primary:vllm/0.10.0"},
	}
	// Shared layer off: the primary only (no reuse.yaml donor either: resolve_one
	// returns before channel 2); allreduce has no 0.10.0 file, so no source;
	// NCCL comes from misc.nccl_version in every mode.
	own := map[string][]string{
		"gemm_perf":              {"primary:vllm/0.10.0"},
		"context_attention_perf": {"primary:vllm/0.10.0"},
		"custom_allreduce_perf":  nil,
		"nccl_perf":              {"nccl:nccl/2.26.2"},
		"moe_perf":               {"primary:vllm/0.10.0"},
	}
	cases := []struct {
		name string
		opts []LoadOption
		want map[string][]string
	}{
		{"no option", nil, union},
		{"SILICON", []LoadOption{ForMode(ModeSilicon)}, union},
		{"HYBRID", []LoadOption{ForMode(ModeHybrid)}, union},
		{"EMPIRICAL", []LoadOption{ForMode(ModeEmpirical)}, own},
		{"SOL", []LoadOption{ForMode(ModeSOL)}, own},
		{"SILICON, shared layer forced off", []LoadOption{ForMode(ModeSilicon), WithSharedLayer(false)}, own},
		{"EMPIRICAL, shared layer forced on", []LoadOption{WithSharedLayer(true), ForMode(ModeEmpirical)}, union},
	}
	for _, c := range cases {
		d, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0", c.opts...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for table, want := range c.want {
			if got := sourcesOf(d, table); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s sources = %v, want %v", c.name, table, got, want)
			}
		}
	}
}

func TestLoadModeFixtureRows(t *testing.T) {
	root := buildFixture(t)
	ctx := context.Background()
	shared, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0", ForMode(ModeSilicon))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []DatabaseMode{ModeEmpirical, ModeSOL} {
		d, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0", ForMode(m))
		if err != nil {
			t.Fatal(err)
		}
		// Earlier-version (0.10.0rc1: m=3, 0.9.0: m=4), donor (0.11.0: m=2) and
		// manifest (trtllm: m=7) GEMM rows are gone; the primary's stay, SOL floor included.
		var ms []int
		for _, r := range d.Gemm {
			ms = append(ms, r.M)
		}
		if !reflect.DeepEqual(ms, []int{1, 64}) {
			t.Errorf("%s: gemm m = %v, want [1 64] (0.10.0's own rows)", m, ms)
		}
		if len(d.AllReduce) != 0 {
			t.Errorf("%s: %d allreduce rows, want 0 (only earlier versions have the table)", m, len(d.AllReduce))
		}
		if len(d.ContextAttention) != 2 || len(shared.ContextAttention) != 3 {
			t.Errorf("%s: context attention rows = %d (shared layer: %d), want 2 (3)", m, len(d.ContextAttention), len(shared.ContextAttention))
		}
		// Primary rows come first in the union, so every table without the
		// shared layer is a prefix of the same table with it.
		for _, p := range []struct {
			name      string
			own, full any
		}{
			{"gemm", d.Gemm, shared.Gemm[:min(len(d.Gemm), len(shared.Gemm))]},
			{"context attention", d.ContextAttention, shared.ContextAttention[:min(len(d.ContextAttention), len(shared.ContextAttention))]},
			{"generation attention", d.GenerationAttention, shared.GenerationAttention[:min(len(d.GenerationAttention), len(shared.GenerationAttention))]},
			{"nccl", d.NCCL, shared.NCCL},
			{"moe", d.MoE, shared.MoE},
			{"moe min latency", d.MoEMinLatency, shared.MoEMinLatency},
			{"compute scale", d.ComputeScale, shared.ComputeScale},
			{"scale matrix", d.ScaleMatrix, shared.ScaleMatrix},
		} {
			if !reflect.DeepEqual(p.own, p.full) {
				t.Errorf("%s: %s rows are not the shared-layer table's leading rows", m, p.name)
			}
		}
	}
}

func TestLoadModeStoreEqualsDir(t *testing.T) {
	root := buildFixture(t)
	ctx := context.Background()
	st := openTestStore(t)
	if _, err := Import(ctx, st, root, ImportOptions{ImportedAt: "t0"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []DatabaseMode{ModeSilicon, ModeHybrid, ModeEmpirical, ModeSOL} {
		a, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0", ForMode(m))
		if err != nil {
			t.Fatal(err)
		}
		b, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0", ForMode(m))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: LoadStore differs from LoadDir", m)
		}
	}
}

func TestLoadModeRejectsUnknownMode(t *testing.T) {
	root := buildFixture(t)
	ctx := context.Background()
	_, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0", ForMode("silicon"))
	if err == nil || !strings.Contains(err.Error(), `database mode "silicon": unknown; use one of SILICON, HYBRID, EMPIRICAL, SOL`) {
		t.Errorf("LoadDir with mode silicon: err = %v", err)
	}
	st := openTestStore(t)
	if _, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0", ForMode("FAST")); err == nil || !strings.Contains(err.Error(), `"FAST"`) {
		t.Errorf("LoadStore with mode FAST: err = %v", err)
	}
	if _, err := LoadEmbedded(ctx, "h200_sxm", "vllm", "0.24.0", ForMode("x")); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("LoadEmbedded with mode x: err = %v", err)
	}
}

// TestLoadModeEmbeddedH200 pins the case that motivated per-mode loading:
// h200_sxm vllm 0.24.0 inherits MoE and generation attention rows from older
// versions under SILICON, and must not under EMPIRICAL.
func TestLoadModeEmbeddedH200(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: loads the embedded h200 data twice")
	}
	ctx := context.Background()
	sil, err := LoadEmbedded(ctx, "h200_sxm", "vllm", "0.24.0", ForMode(ModeSilicon))
	if err != nil {
		t.Fatal(err)
	}
	emp, err := LoadEmbedded(ctx, "h200_sxm", "vllm", "0.24.0", ForMode(ModeEmpirical))
	if err != nil {
		t.Fatal(err)
	}
	inherited := 0
	for _, s := range sil.Sources {
		if s.Channel == "earlier" || s.Channel == "manifest" { // the shared layer: earlier versions, cross-backend fill
			inherited += s.Used
		}
	}
	if inherited == 0 {
		t.Fatalf("SILICON load inherits no earlier-version rows; the fixture no longer shows the difference")
	}
	if got := channelsOf(emp); !reflect.DeepEqual(got, map[string]bool{"primary": true, "nccl": true}) {
		t.Errorf("EMPIRICAL channels = %v, want primary and nccl only", got)
	}
	for _, s := range emp.Sources {
		if s.Channel == "primary" && s.Version != "0.24.0" {
			t.Errorf("EMPIRICAL primary %s from %s", s.Table, s.Version)
		}
	}
	nSil, nEmp := rowCount(sil), rowCount(emp)
	if nSil-nEmp != inherited {
		t.Errorf("row difference %d, want the %d inherited rows", nSil-nEmp, inherited)
	}
	t.Logf("h200_sxm vllm 0.24.0: SILICON %d rows (%d inherited from earlier versions), EMPIRICAL %d", nSil, inherited, nEmp)
}

// rowCount is the number of rows of every table of d.
func rowCount(d *Data) int {
	return len(d.Gemm) + len(d.ContextAttention) + len(d.GenerationAttention) + len(d.AllReduce) + len(d.NCCL) +
		len(d.MoE) + len(d.MoEMinLatency) + len(d.ComputeScale) + len(d.ScaleMatrix) +
		len(d.MLAContextModule) + len(d.MLAGenerationModule) + len(d.MLAContext) + len(d.MLAGeneration) + len(d.MLABmm) +
		len(d.DSAContext) + len(d.DSAGeneration) + len(d.GDN)
}
