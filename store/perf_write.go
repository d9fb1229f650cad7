package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// PerfTx is the transaction of one perf-data import (perfdb.Import): every write
// of the import runs on it, under the context given to ImportPerf, and they are
// committed together or not at all. It is valid only inside ImportPerf's fn.
type PerfTx struct {
	ctx context.Context
	tx  *sqlx.Tx
}

// ImportPerf runs fn in one transaction: committed if fn returns nil, rolled back
// otherwise (the store is then unchanged).
func (s *Store) ImportPerf(ctx context.Context, fn func(*PerfTx) error) error {
	return s.Tx(ctx, func(tx *sqlx.Tx) error { return fn(&PerfTx{ctx: ctx, tx: tx}) })
}

// ModelUpsert is a models row as an import writes it.
type ModelUpsert struct {
	ID, Architecture, Family                                      string
	Layers, Hidden, Heads, KVHeads, HeadDim, Inter, Vocab, MaxPos int
	NumExperts, TopK, MoEInter                                    int
	GemmQuant, KVQuant, FMHAQuant, MoEQuant, CommQuant            string
	Config                                                        string
	QuantConfig                                                   *string // nil: none
	SHA256                                                        string
}

// UpsertModel inserts or replaces the models row m.ID.
func (t *PerfTx) UpsertModel(m ModelUpsert) error {
	var q any
	if m.QuantConfig != nil {
		q = *m.QuantConfig
	}
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO models (id, architecture, family, num_hidden_layers, hidden_size,
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
		m.Config, q, m.SHA256)
	return err
}

// UpsertSystem writes the systems row without deleting it (a REPLACE would
// cascade to the system's perf rows).
func (t *PerfTx) UpsertSystem(s SystemRow) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO systems (name, data_dir, mem_bw, mem_bw_empirical_scaling_factor,
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
		s.InterNodeBW, s.IntraNodeBW, s.PCIeBW, s.P2PLatency, s.NumGPUsPerRack, s.InterRackBW, s.NCCLMem,
		s.OtherMem, s.NCCLVersion, s.YAML, s.SHA256)
	return err
}

// ClearPerfIndex deletes a system's perf_dirs (and with them its perf_reuse
// rows) and perf_manifest rows, before they are written anew.
func (t *PerfTx) ClearPerfIndex(system string) error {
	if _, err := t.tx.ExecContext(t.ctx, `DELETE FROM perf_dirs WHERE system = ?`, system); err != nil {
		return fmt.Errorf("store: clear perf_dirs of %s: %w", system, err)
	}
	if _, err := t.tx.ExecContext(t.ctx, `DELETE FROM perf_manifest WHERE system = ?`, system); err != nil {
		return fmt.Errorf("store: clear perf_manifest of %s: %w", system, err)
	}
	return nil
}

// InsertPerfDir writes one perf_dirs row of system.
func (t *PerfTx) InsertPerfDir(system string, d PerfDir) error {
	inc := 0
	if d.Incomplete {
		inc = 1
	}
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO perf_dirs (system, family, backend, version, collection_meta, reuse, incomplete)
			VALUES (?,?,?,?,?,?,?)`, system, d.Family, d.Backend, d.Version, d.CollectionMeta, d.Reuse, inc)
	return err
}

// InsertPerfReuse writes the ord-th perf_reuse row of system.
func (t *PerfTx) InsertPerfReuse(system string, ord int, r PerfReuse) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO perf_reuse (system, family, backend, version, ord, table_name,
				from_version, reason, approved_by) VALUES (?,?,?,?,?,?,?,?,?)`,
		system, r.Family, r.Backend, r.Version, ord, r.Table, r.From, r.Reason, r.ApprovedBy)
	return err
}

// InsertPerfManifest writes the ord-th perf_manifest row of system.
func (t *PerfTx) InsertPerfManifest(system string, ord int, m PerfManifest) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO perf_manifest (system, ord, op_file, kernel_source, tier, frameworks)
			VALUES (?,?,?,?,?,?)`, system, ord, m.OpFile, m.Kernel, m.Tier, m.Frameworks)
	return err
}

// PerfSourceState is what an import needs to know of a stored perf file: the
// PerfFile and whether it is copied into its mirror table.
type PerfSourceState struct {
	PerfFile
	Mirrored bool `db:"mirrored"`
}

// PerfSources lists a system's stored perf files, unordered.
func (t *PerfTx) PerfSources(system string) ([]PerfSourceState, error) {
	var out []PerfSourceState
	if err := t.tx.SelectContext(t.ctx, &out, `SELECT id, path, sha256, mirrored FROM perf_sources WHERE system = ?`, system); err != nil {
		return nil, fmt.Errorf("store: read perf_sources: %w", err)
	}
	return out, nil
}

// PerfSource is a perf_sources row as an import writes it.
type PerfSource struct {
	System, Family, Backend, Version, Table, Path, SHA256 string
	Rows                                                  int
	ImportedAt                                            string
	Mirrored                                              bool
	Content                                               []byte
}

// InsertPerfSource writes one perf file and returns its id.
func (t *PerfTx) InsertPerfSource(f PerfSource) (int64, error) {
	mirrored := 0
	if f.Mirrored {
		mirrored = 1
	}
	res, err := t.tx.ExecContext(t.ctx, `INSERT INTO perf_sources (system, family, backend, version, table_name, path, sha256, rows, imported_at, mirrored, content)
			VALUES (?,?,?,?,?,?,?,?,?,?,?)`, f.System, f.Family, f.Backend, f.Version, f.Table, f.Path, f.SHA256, f.Rows, f.ImportedAt, mirrored, f.Content)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// SetPerfMirrored marks the perf file id as copied into its mirror table.
func (t *PerfTx) SetPerfMirrored(id int64) error {
	_, err := t.tx.ExecContext(t.ctx, `UPDATE perf_sources SET mirrored = 1 WHERE id = ?`, id)
	return err
}

// DeletePerfSource removes the perf file id (and, by cascade, its mirror rows).
func (t *PerfTx) DeletePerfSource(id int64) error {
	_, err := t.tx.ExecContext(t.ctx, `DELETE FROM perf_sources WHERE id = ?`, id)
	return err
}

// perfMirrorColumns are the leading columns of every perf_* mirror table
// (migrations/00002_perf.sql), before the table's own.
var perfMirrorColumns = []string{"source_id", "row_idx", "system", "backend", "version"}

// MirrorInsert is a prepared insert into one perf_* mirror table.
type MirrorInsert struct{ stmt *sql.Stmt }

// PrepareMirrorInsert prepares an insert into the mirror table table whose own
// columns are cols; each Exec takes source_id, row_idx, system, backend, version
// and then the values of cols. Close it after use.
func (t *PerfTx) PrepareMirrorInsert(table string, cols []string) (*MirrorInsert, error) {
	all := append(append([]string{}, perfMirrorColumns...), cols...)
	q := "INSERT INTO " + table + " (" + strings.Join(all, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?,", len(all)), ",") + ")"
	stmt, err := t.tx.PrepareContext(t.ctx, q)
	if err != nil {
		return nil, err
	}
	return &MirrorInsert{stmt}, nil
}

// Exec inserts one row.
func (m *MirrorInsert) Exec(ctx context.Context, args ...any) error {
	_, err := m.stmt.ExecContext(ctx, args...)
	return err
}

// Close releases the prepared statement.
func (m *MirrorInsert) Close() error { return m.stmt.Close() }

// MirrorRows reads the rows of the perf file sourceID from its mirror table
// table (columns cols, in row order) and hands each to scan.
func (s *Store) MirrorRows(ctx context.Context, table string, cols []string, sourceID int64, scan func(scan func(dest ...any) error) error) error {
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + table + " WHERE source_id = ? ORDER BY row_idx"
	return s.EachRow(ctx, q, []any{sourceID}, scan)
}
