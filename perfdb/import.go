package perfdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// ImportOptions control an import.
type ImportOptions struct {
	// ID is the model id for a single config.json whose file name does not
	// carry one (<org>--<name>_config.json does).
	ID string
	// ImportedAt is stored in perf_sources.imported_at (provenance only; no
	// result reads it). The CLI passes the wall clock; tests a fixed string.
	ImportedAt string
	// NoMirror skips copying perf rows into the perf_* SQL tables (the bulk
	// of an import's time). LoadStore does not read them: it decodes the
	// stored files. A later import without NoMirror fills the mirror of
	// unchanged files.
	NoMirror bool
	// Progress, when set, is called after each Parquet file of a system is
	// stored or skipped: done of total files of that system.
	Progress func(system string, done, total int)
}

// ImportReport summarises one import.
type ImportReport struct {
	Systems       []string // system specs imported
	Models        []string // model ids imported
	Files         int      // Parquet files (re)imported
	FilesSkipped  int      // Parquet files unchanged (same sha256)
	FilesRemoved  int      // Parquet files in the store no longer in the folder
	Rows          int      // perf rows copied into the perf_* SQL mirror tables
	TablesSkipped []string // table stems present but not imported by aicdb, sorted
}

// Import imports PATH into the store in one transaction; on any error the
// store is unchanged. PATH is an aiconfigurator `systems` folder (<system>.yaml
// files beside a data/ tree), a folder of <org>--<name>_config.json files (with
// optional <org>--<name>_hf_quant_config.json), or one config.json. Re-importing
// is idempotent: files with the same sha256 are skipped, changed ones replaced,
// and files gone from the folder removed.
func Import(ctx context.Context, st *store.Store, p string, o ImportOptions) (*ImportReport, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", p, err)
	}
	if !fi.IsDir() {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", p, err)
		}
		var quant []byte
		base := filepath.Base(p)
		if stem, ok := strings.CutSuffix(base, "_config.json"); ok && stem != "" {
			q, err := os.ReadFile(filepath.Join(filepath.Dir(p), stem+"_hf_quant_config.json"))
			if err == nil {
				quant = q
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("import %s: %w", p, err)
			}
		}
		id := o.ID
		if id == "" {
			id = modelIDFromFile(base)
		}
		if id == "" {
			return nil, fmt.Errorf("import %s: cannot tell the model id from the file name; pass --id ORG/NAME", p)
		}
		rep := &ImportReport{}
		err = st.ImportPerf(ctx, func(tx *store.PerfTx) error {
			return importModel(ctx, tx, id, p, data, quant, rep)
		})
		if err != nil {
			return nil, err
		}
		return rep, nil
	}
	return ImportFS(ctx, st, os.DirFS(p), p, o)
}

// ImportFS imports a systems folder or a model-config folder given as a file
// system (Import for directories; `aicdb init` for the embedded data). label
// names the root in errors. A root holding both `systems/` and
// `model_configs/` (aiconfigurator_core's layout) imports both.
func ImportFS(ctx context.Context, st *store.Store, fsys fs.FS, label string, o ImportOptions) (*ImportReport, error) {
	rep := &ImportReport{}
	err := st.ImportPerf(ctx, func(tx *store.PerfTx) error {
		return importRoot(ctx, tx, fsys, label, o, rep)
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

func importRoot(ctx context.Context, tx *store.PerfTx, fsys fs.FS, label string, o ImportOptions, rep *ImportReport) error {
	systems, err := systemNamesFS(fsys)
	if err != nil {
		return fmt.Errorf("import %s: %w", label, err)
	}
	models, err := modelFilesFS(fsys)
	if err != nil {
		return fmt.Errorf("import %s: %w", label, err)
	}
	did := false
	if len(systems) > 0 {
		did = true
		for _, s := range systems {
			if err := importSystem(ctx, tx, fsys, label, s, o, rep); err != nil {
				return err
			}
		}
	}
	if len(models) > 0 {
		did = true
		if err := importModelsFS(ctx, tx, fsys, label, models, rep); err != nil {
			return err
		}
	}
	for _, sub := range []string{"systems", "model_configs"} {
		if fi, err := fs.Stat(fsys, sub); err == nil && fi.IsDir() {
			sfs, err := fs.Sub(fsys, sub)
			if err != nil {
				return err
			}
			did = true
			if err := importRoot(ctx, tx, sfs, path.Join(label, sub), o, rep); err != nil {
				return err
			}
		}
	}
	if !did {
		return fmt.Errorf("import %s: found no system spec (<system>.yaml beside data/) and no <org>--<name>_config.json; pass an aiconfigurator systems folder, a model-config folder or one config.json", label)
	}
	sort.Strings(rep.TablesSkipped)
	return nil
}

// modelIDFromFile maps "<org>--<name>_config.json" to "org/name" ("" if the
// name does not follow the pattern).
func modelIDFromFile(base string) string {
	stem, ok := strings.CutSuffix(base, "_config.json")
	if !ok || strings.HasSuffix(stem, "_hf_quant") {
		return ""
	}
	org, name, ok := strings.Cut(stem, "--")
	if !ok || org == "" || name == "" {
		return ""
	}
	return org + "/" + name
}

// modelFilesFS lists the <org>--<name>_config.json files at the root of fsys.
func modelFilesFS(fsys fs.FS) ([]string, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && modelIDFromFile(e.Name()) != "" {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

func importModelsFS(ctx context.Context, tx *store.PerfTx, fsys fs.FS, label string, files []string, rep *ImportReport) error {
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return fmt.Errorf("model config %s: %w", path.Join(label, f), err)
		}
		stem := strings.TrimSuffix(f, "_config.json")
		quant, err := fs.ReadFile(fsys, stem+"_hf_quant_config.json")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("model config %s: %w", path.Join(label, stem+"_hf_quant_config.json"), err)
		}
		if err := importModel(ctx, tx, modelIDFromFile(f), path.Join(label, f), data, quant, rep); err != nil {
			return err
		}
	}
	return nil
}

// importModel parses one HF config (+ quant config) and upserts it.
func importModel(ctx context.Context, tx *store.PerfTx, id, name string, config, quant []byte, rep *ImportReport) error {
	m, err := ParseHFConfig(id, name, config, quant)
	if err != nil {
		return err
	}
	h := sha256.New()
	h.Write(config)
	h.Write([]byte{0})
	h.Write(quant)
	var q *string
	if quant != nil {
		if !json.Valid(quant) {
			return fmt.Errorf("model quant config for %s: not valid JSON", name)
		}
		qs := string(quant)
		q = &qs
	}
	err = tx.UpsertModel(store.ModelUpsert{ID: m.ID, Architecture: m.Architecture, Family: m.Family,
		Layers: m.Layers, Hidden: m.Hidden, Heads: m.Heads, KVHeads: m.KVHeads, HeadDim: m.HeadDim, Inter: m.Inter,
		Vocab: m.Vocab, MaxPos: m.MaxPos, NumExperts: m.NumExperts, TopK: m.TopK, MoEInter: m.MoEInter,
		GemmQuant: m.GemmQuant, KVQuant: m.KVQuant, FMHAQuant: m.FMHAQuant, MoEQuant: m.MoEQuant, CommQuant: m.CommQuant,
		Config: string(config), QuantConfig: q, SHA256: hex.EncodeToString(h.Sum(nil))})
	if err != nil {
		return fmt.Errorf("store model %s: %w", id, err)
	}
	rep.Models = append(rep.Models, id)
	return nil
}

// importSystem imports one system spec with its data tree: the systems row,
// every version dir with its sidecars, the manifest, and every importable
// Parquet file (skipped when its sha256 is unchanged).
func importSystem(ctx context.Context, tx *store.PerfTx, fsys fs.FS, label, name string, o ImportOptions, rep *ImportReport) error {
	sys, raw, err := readSystemFS(fsys, label, name)
	if err != nil {
		return err
	}
	tr, err := scanTreeFS(fsys, label, sys)
	if err != nil {
		return err
	}
	if err := upsertSystem(ctx, tx, sys, raw); err != nil {
		return err
	}
	if err := tx.ClearPerfIndex(name); err != nil {
		return err
	}
	keys := make([]dirKey, 0, len(tr.dirs))
	for k := range tr.dirs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.family != b.family {
			return a.family < b.family
		}
		if a.backend != b.backend {
			return a.backend < b.backend
		}
		return a.version < b.version
	})
	for _, k := range keys {
		d := tr.dirs[k]
		dk := store.PerfDirKey{Family: k.family, Backend: k.backend, Version: k.version}
		if err := tx.InsertPerfDir(name, store.PerfDir{PerfDirKey: dk, CollectionMeta: d.meta, Reuse: d.reuseText, Incomplete: d.incomplete}); err != nil {
			return fmt.Errorf("store: perf dir %s/%s/%s: %w", k.family, k.backend, k.version, err)
		}
		for i, e := range d.reuse {
			if err := tx.InsertPerfReuse(name, i, store.PerfReuse{PerfDirKey: dk, Table: e.Table, From: e.FromVersion, Reason: e.Reason, ApprovedBy: e.ApprovedBy}); err != nil {
				return fmt.Errorf("store: reuse entry of %s/%s/%s: %w", k.family, k.backend, k.version, err)
			}
		}
	}
	for i, e := range tr.manifest {
		fws, _ := json.Marshal(append([]string{}, e.Frameworks...))
		if err := tx.InsertPerfManifest(name, i, store.PerfManifest{OpFile: e.OpFile, Kernel: e.KernelSource, Tier: e.Tier, Frameworks: string(fws)}); err != nil {
			return fmt.Errorf("store: manifest entry %d: %w", i, err)
		}
	}
	if err := importFiles(ctx, tx, fsys, label, tr, o, rep); err != nil {
		return err
	}
	rep.TablesSkipped = mergeSorted(rep.TablesSkipped, skippedStems(fsys, tr))
	rep.Systems = append(rep.Systems, name)
	return nil
}

// upsertSystem writes the systems row without deleting it (a REPLACE would
// cascade to the system's perf rows).
func upsertSystem(ctx context.Context, tx *store.PerfTx, s *System, raw []byte) error {
	mem := map[string]float64{}
	for k, v := range s.NCCLMem {
		mem[strconv.Itoa(k)] = v
	}
	memJSON, _ := json.Marshal(mem) // map keys are sorted: deterministic
	sum := sha256.Sum256(raw)
	err := tx.UpsertSystem(store.SystemRow{Name: s.Name, DataDir: s.DataDir, MemBW: s.MemBW,
		MemBWEmpiricalScalingFactor: s.MemBWEmpiricalScalingFactor, MemEmpiricalConstantLatency: s.MemEmpiricalConstantLatency,
		MemCapacity: s.MemCapacity, BF16TCFlops: s.BF16TCFlops, INT8TCFlops: s.INT8TCFlops, FP8TCFlops: s.FP8TCFlops,
		FP4TCFlops: s.FP4TCFlops, Power: s.Power, SMVersion: s.SMVersion, NumGPUsPerNode: s.NumGPUsPerNode,
		InterNodeBW: s.InterNodeBW, IntraNodeBW: s.IntraNodeBW, PCIeBW: s.PCIeBW, P2PLatency: s.P2PLatency,
		NumGPUsPerRack: s.NumGPUsPerRack, InterRackBW: s.InterRackBW, NCCLMem: string(memJSON), OtherMem: s.OtherMem,
		NCCLVersion: s.NCCLVersion, YAML: string(raw), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return fmt.Errorf("store: system %s: %w", s.Name, err)
	}
	return nil
}

// skippedStems lists Parquet table stems in the tree's version dirs that aicdb
// does not import (mla, kda, …), for the report.
func skippedStems(fsys fs.FS, tr *tree) []string {
	set := map[string]bool{}
	for k := range tr.dirs {
		ents, err := fs.ReadDir(fsys, path.Join(path.Clean(tr.system.DataDir), k.family, k.backend, k.version))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if stem, ok := strings.CutSuffix(e.Name(), ".parquet"); ok && !isImportedStem(stem) {
				set[stem] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func mergeSorted(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range a {
		set[s] = true
	}
	for _, s := range b {
		set[s] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
