package refine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// embeddedSource serves the perf data and model configs shipped in the binary
// (h200_sxm), like a store after `aicdb init`, without the import.
type embeddedSource struct{}

func (embeddedSource) Systems(context.Context) ([]string, error) { return perfdb.EmbeddedSystems() }

func (embeddedSource) Backends(_ context.Context, system string) ([]string, error) {
	var out []string
	for _, b := range []string{"sglang", "trtllm", "vllm"} {
		if vs, err := perfdb.EmbeddedVersions(system, b); err == nil && len(vs) > 0 {
			out = append(out, b)
		}
	}
	return out, nil
}

func (embeddedSource) Versions(_ context.Context, system, backend string) ([]string, error) {
	return perfdb.EmbeddedVersions(system, backend)
}

func (embeddedSource) Data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	return perfdb.LoadEmbedded(ctx, system, backend, version, opts...)
}

func (embeddedSource) Model(_ context.Context, id string) (*perfdb.Model, error) {
	return perfdb.EmbeddedModel(id)
}

// splitSource answers one system from extra and everything else from base.
type splitSource struct {
	base        PerfSource
	extra       PerfSource
	extraSystem string
}

func (s splitSource) pick(system string) PerfSource {
	if system == s.extraSystem {
		return s.extra
	}
	return s.base
}

func (s splitSource) Systems(ctx context.Context) ([]string, error) {
	out, err := s.base.Systems(ctx)
	return append(slices.Clone(out), s.extraSystem), err
}

func (s splitSource) Backends(ctx context.Context, system string) ([]string, error) {
	return s.pick(system).Backends(ctx, system)
}

func (s splitSource) Versions(ctx context.Context, system, backend string) ([]string, error) {
	return s.pick(system).Versions(ctx, system, backend)
}

func (s splitSource) Data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	return s.pick(system).Data(ctx, system, backend, version, opts...)
}

func (s splitSource) Model(ctx context.Context, id string) (*perfdb.Model, error) {
	return s.base.Model(ctx, id)
}

// memoSource loads each data set once for every evaluator of a test (perf data is
// immutable), so fresh evaluators cost a querier build, not a load.
type memoSource struct {
	PerfSource
	mu   sync.Mutex
	data map[string]*perfdb.Data
}

func (s *memoSource) Data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	// The key omits the load options (the database mode): the test sweeps SILICON only.
	k := system + "/" + backend + "/" + version
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.data[k]; ok {
		return d, nil
	}
	d, err := s.PerfSource.Data(ctx, system, backend, version, opts...)
	if err == nil {
		s.data[k] = d
	}
	return d, err
}

// twoSystemSource returns the embedded h200_sxm plus b200_sxm from ../shared, and
// the second system (or backend) the contamination test sweeps: b200_sxm with vllm
// when the shared slice is present, else h200_sxm with sglang.
func twoSystemSource(t *testing.T) (src PerfSource, system2, backend2 string) {
	t.Helper()
	root := os.Getenv("AICDB_AIC_DATA")
	if root == "" {
		root = "../../shared/data/aiconfigurator"
	}
	core := filepath.Join(root, "aic-core", "src", "aiconfigurator_core")
	if _, err := os.Stat(filepath.Join(core, "systems", "b200_sxm.yaml")); err != nil {
		t.Logf("b200_sxm not found under %s: second combination is h200_sxm/sglang", root)
		return embeddedSource{}, "h200_sxm", "sglang"
	}
	dir := DirSource{SystemsDir: filepath.Join(core, "systems"), ModelsDir: filepath.Join(core, "model_configs")}
	return splitSource{base: embeddedSource{}, extra: dir, extraSystem: "b200_sxm"}, "b200_sxm", "vllm"
}

// TestNoCrossModelContamination is issue 8 item 1: one evaluator sweeps two models
// on two systems (or backends) into one store and refines every row in one call,
// as `aicdb query` does; every stored legacy, screening and quantitative number
// must equal a fresh evaluation of that point by an evaluator that never saw the
// other models and systems. A cache keyed by less than every input (the old
// perfdb.Config key without model and system) fails here.
func TestNoCrossModelContamination(t *testing.T) {
	base, system2, backend2 := twoSystemSource(t)
	// Every sweep here is SILICON (one load option shape), so memoising by
	// (system, backend, version) is exact.
	src := &memoSource{PerfSource: base, data: map[string]*perfdb.Data{}}
	ctx := context.Background()
	st := openStore(t)
	ev := NewPerfdbEvaluator(src)
	type combo struct{ model, system, backend string }
	var combos []combo
	for _, m := range []string{"Qwen/Qwen3-32B", "meta-llama/Meta-Llama-3.1-8B"} {
		combos = append(combos, combo{m, "h200_sxm", "vllm"}, combo{m, system2, backend2})
	}
	for _, c := range combos {
		spec := SweepSpec{Model: c.model, System: c.system, Backend: c.backend, TotalGPUs: 8, ISL: 4000, OSL: 500,
			TPs: []int{1, 2}, Batches: []int{8, 64}, CtxTokens: []int{4000}}
		if _, err := Sweep(ctx, st, ev, spec, SweepOptions{Now: fixedNow}); err != nil {
			t.Fatalf("sweep %v: %v", c, err)
		}
	}
	rows, err := st.SelectPoints(ctx, store.PointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// Refine every row in one call, models and systems interleaved.
	n, err := Resolve(ctx, st, ev, rows, 2)
	if err != nil {
		t.Fatal(err)
	}
	if n < len(combos) {
		t.Fatalf("%d rows refined, want at least one per combination", n)
	}
	stored, err := st.SelectPoints(ctx, store.PointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[combo]int{}
	fresh := map[combo]*PerfdbEvaluator{}
	for _, p := range stored {
		c := combo{p.Model, p.System, p.Backend}
		if fresh[c] == nil {
			fresh[c] = NewPerfdbEvaluator(src)
		}
		f := fresh[c]
		l, err := f.Legacy(ctx, p.PointInputs)
		if err != nil {
			t.Fatal(err)
		}
		if l != p.Legacy {
			t.Errorf("%s %s %s b%d: stored legacy %+v, fresh %+v", p.Model, p.System, p.Parallel(), p.Batch, p.Legacy, l)
		}
		if p.Q.Tier != store.TierQuantitative {
			continue
		}
		seen[c]++
		q, err := f.Quantitative(ctx, p.PointInputs)
		if err != nil {
			t.Fatal(err)
		}
		if q.V != p.Q.V {
			t.Errorf("%s %s %s b%d: stored ttft p99 %.1f itl p99 %.2f, fresh eval %.1f / %.2f", p.Model, p.System, p.Parallel(), p.Batch,
				p.Q.V[store.QTTFTSteadyP99], p.Q.V[store.QITLP99], q.V[store.QTTFTSteadyP99], q.V[store.QITLP99])
		}
	}
	for _, c := range combos {
		if seen[c] == 0 {
			t.Errorf("%v: no quantitative row compared", c)
		}
	}
	t.Logf("compared %s", fmt.Sprint(seen))
}
