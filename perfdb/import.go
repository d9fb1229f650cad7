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

	"github.com/jmoiron/sqlx"

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
		err = st.Tx(ctx, func(tx *sqlx.Tx) error {
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
	err := st.Tx(ctx, func(tx *sqlx.Tx) error {
		return importRoot(ctx, tx, fsys, label, o, rep)
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

func importRoot(ctx context.Context, tx *sqlx.Tx, fsys fs.FS, label string, o ImportOptions, rep *ImportReport) error {
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

func importModelsFS(ctx context.Context, tx *sqlx.Tx, fsys fs.FS, label string, files []string, rep *ImportReport) error {
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
func importModel(ctx context.Context, tx *sqlx.Tx, id, name string, config, quant []byte, rep *ImportReport) error {
	m, err := ParseHFConfig(id, name, config, quant)
	if err != nil {
		return err
	}
	h := sha256.New()
	h.Write(config)
	h.Write([]byte{0})
	h.Write(quant)
	var q any
	if quant != nil {
		if !json.Valid(quant) {
			return fmt.Errorf("model quant config for %s: not valid JSON", name)
		}
		q = string(quant)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO models (id, architecture, family, num_hidden_layers, hidden_size,
		num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size, max_position_embeddings,
		num_experts, num_experts_per_tok, moe_intermediate_size, gemm_quant, kvcache_quant, fmha_quant, moe_quant,
		comm_quant, config, quant_config, sha256) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (id) DO UPDATE SET architecture=excluded.architecture, family=excluded.family,
		num_hidden_layers=excluded.num_hidden_layers, hidden_size=excluded.hidden_size,
		num_attention_heads=excluded.num_attention_heads, num_key_value_heads=excluded.num_key_value_heads,
		head_dim=excluded.head_dim, intermediate_size=excluded.intermediate_size, vocab_size=excluded.vocab_size,
		max_position_embeddings=excluded.max_position_embeddings, num_experts=excluded.num_experts,
		num_experts_per_tok=excluded.num_experts_per_tok, moe_intermediate_size=excluded.moe_intermediate_size,
		gemm_quant=excluded.gemm_quant, kvcache_quant=excluded.kvcache_quant, fmha_quant=excluded.fmha_quant,
		moe_quant=excluded.moe_quant, comm_quant=excluded.comm_quant, config=excluded.config,
		quant_config=excluded.quant_config, sha256=excluded.sha256`,
		m.ID, m.Architecture, m.Family, m.Layers, m.Hidden, m.Heads, m.KVHeads, m.HeadDim, m.Inter, m.Vocab, m.MaxPos,
		m.NumExperts, m.TopK, m.MoEInter, m.GemmQuant, m.KVQuant, m.FMHAQuant, m.MoEQuant, m.CommQuant,
		string(config), q, hex.EncodeToString(h.Sum(nil)))
	if err != nil {
		return fmt.Errorf("store model %s: %w", id, err)
	}
	rep.Models = append(rep.Models, id)
	return nil
}

// importSystem imports one system spec with its data tree: the systems row,
// every version dir with its sidecars, the manifest, and every importable
// Parquet file (skipped when its sha256 is unchanged).
func importSystem(ctx context.Context, tx *sqlx.Tx, fsys fs.FS, label, name string, o ImportOptions, rep *ImportReport) error {
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
	if _, err := tx.ExecContext(ctx, `DELETE FROM perf_dirs WHERE system = ?`, name); err != nil {
		return fmt.Errorf("store: clear perf_dirs of %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM perf_manifest WHERE system = ?`, name); err != nil {
		return fmt.Errorf("store: clear perf_manifest of %s: %w", name, err)
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
		inc := 0
		if d.incomplete {
			inc = 1
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO perf_dirs (system, family, backend, version, collection_meta, reuse, incomplete)
			VALUES (?,?,?,?,?,?,?)`, name, k.family, k.backend, k.version, d.meta, d.reuseText, inc); err != nil {
			return fmt.Errorf("store: perf dir %s/%s/%s: %w", k.family, k.backend, k.version, err)
		}
		for i, e := range d.reuse {
			if _, err := tx.ExecContext(ctx, `INSERT INTO perf_reuse (system, family, backend, version, ord, table_name,
				from_version, reason, approved_by) VALUES (?,?,?,?,?,?,?,?,?)`,
				name, k.family, k.backend, k.version, i, e.Table, e.FromVersion, e.Reason, e.ApprovedBy); err != nil {
				return fmt.Errorf("store: reuse entry of %s/%s/%s: %w", k.family, k.backend, k.version, err)
			}
		}
	}
	for i, e := range tr.manifest {
		fws, _ := json.Marshal(append([]string{}, e.Frameworks...))
		if _, err := tx.ExecContext(ctx, `INSERT INTO perf_manifest (system, ord, op_file, kernel_source, tier, frameworks)
			VALUES (?,?,?,?,?,?)`, name, i, e.OpFile, e.KernelSource, e.Tier, string(fws)); err != nil {
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
func upsertSystem(ctx context.Context, tx *sqlx.Tx, s *System, raw []byte) error {
	mem := map[string]float64{}
	for k, v := range s.NCCLMem {
		mem[strconv.Itoa(k)] = v
	}
	memJSON, _ := json.Marshal(mem) // map keys are sorted: deterministic
	sum := sha256.Sum256(raw)
	_, err := tx.ExecContext(ctx, `INSERT INTO systems (name, data_dir, mem_bw, mem_bw_empirical_scaling_factor,
		mem_empirical_constant_latency, mem_capacity, bfloat16_tc_flops, int8_tc_flops, fp8_tc_flops, fp4_tc_flops,
		power, sm_version, num_gpus_per_node, inter_node_bw, intra_node_bw, pcie_bw, p2p_latency, num_gpus_per_rack,
		inter_rack_bw, nccl_mem, other_mem, nccl_version, yaml, sha256)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (name) DO UPDATE SET data_dir=excluded.data_dir, mem_bw=excluded.mem_bw,
		mem_bw_empirical_scaling_factor=excluded.mem_bw_empirical_scaling_factor,
		mem_empirical_constant_latency=excluded.mem_empirical_constant_latency, mem_capacity=excluded.mem_capacity,
		bfloat16_tc_flops=excluded.bfloat16_tc_flops, int8_tc_flops=excluded.int8_tc_flops,
		fp8_tc_flops=excluded.fp8_tc_flops, fp4_tc_flops=excluded.fp4_tc_flops, power=excluded.power,
		sm_version=excluded.sm_version, num_gpus_per_node=excluded.num_gpus_per_node,
		inter_node_bw=excluded.inter_node_bw, intra_node_bw=excluded.intra_node_bw, pcie_bw=excluded.pcie_bw,
		p2p_latency=excluded.p2p_latency, num_gpus_per_rack=excluded.num_gpus_per_rack,
		inter_rack_bw=excluded.inter_rack_bw, nccl_mem=excluded.nccl_mem, other_mem=excluded.other_mem,
		nccl_version=excluded.nccl_version, yaml=excluded.yaml, sha256=excluded.sha256`,
		s.Name, s.DataDir, s.MemBW, s.MemBWEmpiricalScalingFactor, s.MemEmpiricalConstantLatency, s.MemCapacity,
		s.BF16TCFlops, s.INT8TCFlops, s.FP8TCFlops, s.FP4TCFlops, s.Power, s.SMVersion, s.NumGPUsPerNode,
		s.InterNodeBW, s.IntraNodeBW, s.PCIeBW, s.P2PLatency, s.NumGPUsPerRack, s.InterRackBW, string(memJSON),
		s.OtherMem, s.NCCLVersion, string(raw), hex.EncodeToString(sum[:]))
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
