package store

import (
	"context"
	"database/sql"
	"fmt"
)

// The perf-data catalog: systems, models and the imported perf files
// (migrations/00002_perf.sql and later). perfdb owns what the rows mean; these
// functions only read and write them.

// SystemRow is one row of the systems table as perfdb needs it (NCCLMem is the
// stored JSON object of GPUs → bytes).
type SystemRow struct {
	Name, DataDir                                                   string
	MemBW, MemBWEmpiricalScalingFactor, MemEmpiricalConstantLatency float64
	MemCapacity, BF16TCFlops, INT8TCFlops, FP8TCFlops, FP4TCFlops   float64
	Power                                                           float64
	SMVersion, NumGPUsPerNode                                       int
	InterNodeBW, IntraNodeBW, PCIeBW, P2PLatency                    float64
	NumGPUsPerRack                                                  int
	InterRackBW                                                     float64
	NCCLMem                                                         string
	OtherMem                                                        float64
	NCCLVersion                                                     string
	YAML, SHA256                                                    string // written by UpsertSystem only; System leaves them empty
}

// System reads the systems row name; the error is ErrNotFound when there is none.
func (s *Store) System(ctx context.Context, name string) (SystemRow, error) {
	r := SystemRow{Name: name}
	err := s.db.QueryRowContext(ctx, `SELECT data_dir, mem_bw, mem_bw_empirical_scaling_factor, mem_empirical_constant_latency,
		mem_capacity, bfloat16_tc_flops, int8_tc_flops, fp8_tc_flops, fp4_tc_flops, power, sm_version,
		num_gpus_per_node, inter_node_bw, intra_node_bw, pcie_bw, p2p_latency, num_gpus_per_rack, inter_rack_bw,
		nccl_mem, other_mem, nccl_version FROM systems WHERE name = ?`, name).Scan(
		&r.DataDir, &r.MemBW, &r.MemBWEmpiricalScalingFactor, &r.MemEmpiricalConstantLatency,
		&r.MemCapacity, &r.BF16TCFlops, &r.INT8TCFlops, &r.FP8TCFlops, &r.FP4TCFlops, &r.Power, &r.SMVersion,
		&r.NumGPUsPerNode, &r.InterNodeBW, &r.IntraNodeBW, &r.PCIeBW, &r.P2PLatency, &r.NumGPUsPerRack, &r.InterRackBW,
		&r.NCCLMem, &r.OtherMem, &r.NCCLVersion)
	return r, err
}

// SystemNames lists the systems, sorted.
func (s *Store) SystemNames(ctx context.Context) ([]string, error) {
	var out []string
	err := s.db.SelectContext(ctx, &out, `SELECT name FROM systems ORDER BY name`)
	return out, err
}

// SystemSummary is what `aicdb perfdb list` shows of a system.
type SystemSummary struct {
	Name        string  `db:"name"`
	DataDir     string  `db:"data_dir"`
	NCCLVersion string  `db:"nccl_version"`
	GPUs        int     `db:"num_gpus_per_node"`
	Mem         float64 `db:"mem_capacity"`
}

// SystemSummaries lists the systems by name.
func (s *Store) SystemSummaries(ctx context.Context) ([]SystemSummary, error) {
	var rows []SystemSummary
	err := s.db.SelectContext(ctx, &rows, `SELECT name, data_dir, nccl_version, num_gpus_per_node, mem_capacity
		FROM systems ORDER BY name`)
	return rows, err
}

// ModelRow is one row of the models table, without the stored config texts.
type ModelRow struct {
	ID           string `db:"id"`
	Architecture string `db:"architecture"`
	Family       string `db:"family"`
	Layers       int    `db:"num_hidden_layers"`
	Hidden       int    `db:"hidden_size"`
	Heads        int    `db:"num_attention_heads"`
	KVHeads      int    `db:"num_key_value_heads"`
	NumExperts   int    `db:"num_experts"`
	TopK         int    `db:"num_experts_per_tok"`
	GemmQuant    string `db:"gemm_quant"`
	KVQuant      string `db:"kvcache_quant"`
}

// Models lists the models by id.
func (s *Store) Models(ctx context.Context) ([]ModelRow, error) {
	var out []ModelRow
	err := s.db.SelectContext(ctx, &out, `SELECT id, architecture, family, num_hidden_layers, hidden_size,
		num_attention_heads, num_key_value_heads, num_experts, num_experts_per_tok, gemm_quant, kvcache_quant
		FROM models ORDER BY id`)
	return out, err
}

// ModelIDs lists the model ids, sorted.
func (s *Store) ModelIDs(ctx context.Context) ([]string, error) {
	var out []string
	err := s.db.SelectContext(ctx, &out, `SELECT id FROM models ORDER BY id`)
	return out, err
}

// ModelConfig returns a model's stored config.json and hf_quant_config.json
// (nil when it had none); the error is ErrNotFound when the model is absent.
func (s *Store) ModelConfig(ctx context.Context, id string) (config string, quant []byte, err error) {
	var qc sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT config, quant_config FROM models WHERE id = ?`, id).Scan(&config, &qc); err != nil {
		return "", nil, err
	}
	if qc.Valid {
		quant = []byte(qc.String)
	}
	return config, quant, nil
}

// PerfVersionCount is one imported (system, backend, version) with its table and
// row counts.
type PerfVersionCount struct {
	System  string `db:"system"`
	Backend string `db:"backend"`
	Version string `db:"version"`
	Tables  int    `db:"tables"`
	Rows    int    `db:"nrows"`
}

// PerfVersionCounts counts the imported tables and rows per (system, backend,
// version), unordered.
func (s *Store) PerfVersionCounts(ctx context.Context) ([]PerfVersionCount, error) {
	var rows []PerfVersionCount
	err := s.db.SelectContext(ctx, &rows, `SELECT system, backend, version, count(DISTINCT table_name) AS tables,
		sum(rows) AS nrows FROM perf_sources GROUP BY system, backend, version`)
	return rows, err
}

// PerfDirKey names one imported version directory.
type PerfDirKey struct {
	Family  string `db:"family"`
	Backend string `db:"backend"`
	Version string `db:"version"`
}

// PerfDirKeys lists a system's imported version directories, unordered.
func (s *Store) PerfDirKeys(ctx context.Context, system string) ([]PerfDirKey, error) {
	var rows []PerfDirKey
	err := s.db.SelectContext(ctx, &rows, `SELECT family, backend, version FROM perf_dirs WHERE system = ?`, system)
	return rows, err
}

// PerfDir is one perf_dirs row: a version directory and its sidecar texts (nil
// when absent).
type PerfDir struct {
	PerfDirKey
	CollectionMeta, Reuse *string
	Incomplete            bool
}

// PerfReuse is one perf_reuse row (a reuse.yaml entry), in ord order.
type PerfReuse struct {
	PerfDirKey
	Table      string `db:"table_name"`
	From       string `db:"from_version"`
	Reason     string `db:"reason"`
	ApprovedBy string `db:"approved_by"`
}

// PerfManifest is one perf_manifest row; Frameworks is its JSON array.
type PerfManifest struct {
	OpFile     string `db:"op_file"`
	Kernel     string `db:"kernel_source"`
	Tier       string `db:"tier"`
	Frameworks string `db:"frameworks"`
}

// PerfFile is one perf_sources row, without its content.
type PerfFile struct {
	ID     int64  `db:"id"`
	Path   string `db:"path"`
	SHA256 string `db:"sha256"`
}

// PerfIndex is a system's imported directory index: what perfdb resolves a
// (backend, version) on.
type PerfIndex struct {
	Dirs     []PerfDir
	Reuse    []PerfReuse    // by family, backend, version, ord
	Manifest []PerfManifest // by ord
	Files    []PerfFile
}

// PerfIndex reads a system's imported directory index.
func (s *Store) PerfIndex(ctx context.Context, system string) (*PerfIndex, error) {
	ix := &PerfIndex{}
	err := s.EachRow(ctx, `SELECT family, backend, version, collection_meta, reuse, incomplete FROM perf_dirs WHERE system = ?`,
		[]any{system}, func(scan func(...any) error) error {
			var d PerfDir
			var inc int
			if err := scan(&d.Family, &d.Backend, &d.Version, &d.CollectionMeta, &d.Reuse, &inc); err != nil {
				return err
			}
			d.Incomplete = inc == 1
			ix.Dirs = append(ix.Dirs, d)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: read perf_dirs: %w", err)
	}
	if err := s.db.SelectContext(ctx, &ix.Reuse, `SELECT family, backend, version, table_name, from_version, reason, approved_by
		FROM perf_reuse WHERE system = ? ORDER BY family, backend, version, ord`, system); err != nil {
		return nil, fmt.Errorf("store: read perf_reuse: %w", err)
	}
	if err := s.db.SelectContext(ctx, &ix.Manifest, `SELECT op_file, kernel_source, tier, frameworks FROM perf_manifest WHERE system = ? ORDER BY ord`, system); err != nil {
		return nil, fmt.Errorf("store: read perf_manifest: %w", err)
	}
	if err := s.db.SelectContext(ctx, &ix.Files, `SELECT id, path, sha256 FROM perf_sources WHERE system = ?`, system); err != nil {
		return nil, fmt.Errorf("store: read perf_sources: %w", err)
	}
	return ix, nil
}

// PerfContent returns the stored content of the perf file id.
func (s *Store) PerfContent(ctx context.Context, id int64) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowxContext(ctx, `SELECT content FROM perf_sources WHERE id = ?`, id).Scan(&data)
	return data, err
}
