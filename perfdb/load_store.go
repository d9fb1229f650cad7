package perfdb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/aicdb/aicdb/store"
)

// sqlTable maps a row type to its store table (migrations/00002_perf.sql).
// Every perf table starts with source_id, row_idx, system, backend, version.
type sqlTable[R any] struct {
	name string
	cols []string                                      // the row's own columns, in order
	args func(dst []any, r *R, power any) []any        // appends the values of cols to dst; power is nil when the file has none
	scan func(scan func(dest ...any) error) (R, error) // reads cols (power as sql.NullFloat64 → 0)
}

var gemmSQL = sqlTable[GemmRow]{
	name: "perf_gemm",
	cols: []string{"kernel_source", "gemm_dtype", "m", "n", "k", "latency", "power"},
	args: func(dst []any, r *GemmRow, p any) []any {
		return append(dst, r.Kernel, r.Dtype, r.M, r.N, r.K, r.Latency, p)
	},
	scan: func(scan func(...any) error) (GemmRow, error) {
		var r GemmRow
		var p sql.NullFloat64
		err := scan(&r.Kernel, &r.Dtype, &r.M, &r.N, &r.K, &r.Latency, &p)
		r.Power = p.Float64
		return r, err
	},
}

var attentionSQLCols = []string{"kernel_source", "attn_dtype", "kv_cache_dtype", "num_heads", "num_key_value_heads",
	"head_dim", "window_size", "isl", "step", "batch_size", "latency", "power"}

func attentionArgs(dst []any, r *AttentionRow, p any) []any {
	return append(dst, r.Kernel, r.AttnDtype, r.KVDtype, r.NumHeads, r.NumKVHeads, r.HeadDim, r.Window, r.ISL, r.Step, r.Batch, r.Latency, p)
}

func attentionScan(scan func(...any) error) (AttentionRow, error) {
	var r AttentionRow
	var p sql.NullFloat64
	err := scan(&r.Kernel, &r.AttnDtype, &r.KVDtype, &r.NumHeads, &r.NumKVHeads, &r.HeadDim, &r.Window, &r.ISL, &r.Step, &r.Batch, &r.Latency, &p)
	r.Power = p.Float64
	return r, err
}

var contextAttentionSQL = sqlTable[AttentionRow]{name: "perf_context_attention", cols: attentionSQLCols, args: attentionArgs, scan: attentionScan}

var generationAttentionSQL = sqlTable[AttentionRow]{name: "perf_generation_attention", cols: attentionSQLCols, args: attentionArgs, scan: attentionScan}

var allReduceSQL = sqlTable[AllReduceRow]{
	name: "perf_allreduce",
	cols: []string{"kernel_source", "allreduce_dtype", "num_gpus", "message_size", "latency", "power", "implementation"},
	args: func(dst []any, r *AllReduceRow, p any) []any {
		return append(dst, r.Kernel, r.Dtype, r.NumGPUs, r.MessageSize, r.Latency, p, r.Impl)
	},
	scan: func(scan func(...any) error) (AllReduceRow, error) {
		var r AllReduceRow
		var p sql.NullFloat64
		err := scan(&r.Kernel, &r.Dtype, &r.NumGPUs, &r.MessageSize, &r.Latency, &p, &r.Impl)
		r.Power = p.Float64
		return r, err
	},
}

var ncclSQL = sqlTable[NCCLRow]{
	name: "perf_nccl",
	cols: []string{"kernel_source", "nccl_dtype", "op_name", "num_gpus", "message_size", "latency", "power"},
	args: func(dst []any, r *NCCLRow, p any) []any {
		return append(dst, r.Kernel, r.Dtype, r.Op, r.NumGPUs, r.MessageSize, r.Latency, p)
	},
	scan: func(scan func(...any) error) (NCCLRow, error) {
		var r NCCLRow
		var p sql.NullFloat64
		err := scan(&r.Kernel, &r.Dtype, &r.Op, &r.NumGPUs, &r.MessageSize, &r.Latency, &p)
		r.Power = p.Float64
		return r, err
	},
}

var moeSQL = sqlTable[MoERow]{
	name: "perf_moe",
	cols: []string{"kernel_source", "moe_dtype", "distribution", "topk", "num_experts", "hidden_size", "inter_size",
		"moe_tp_size", "moe_ep_size", "num_tokens", "latency", "power"},
	args: func(dst []any, r *MoERow, p any) []any {
		return append(dst, r.Kernel, r.Dtype, r.Distribution, r.TopK, r.NumExperts, r.Hidden, r.Inter, r.MoETP, r.MoEEP, r.NumTokens, r.Latency, p)
	},
	scan: func(scan func(...any) error) (MoERow, error) {
		var r MoERow
		var p sql.NullFloat64
		err := scan(&r.Kernel, &r.Dtype, &r.Distribution, &r.TopK, &r.NumExperts, &r.Hidden, &r.Inter, &r.MoETP, &r.MoEEP, &r.NumTokens, &r.Latency, &p)
		r.Power = p.Float64
		return r, err
	},
}

var quantizeSQLCols = []string{"kernel_source", "quant_dtype", "m", "k", "latency", "power"}

func quantizeArgs(dst []any, r *QuantizeRow, p any) []any {
	return append(dst, r.Kernel, r.Dtype, r.M, r.K, r.Latency, p)
}

func quantizeScan(scan func(...any) error) (QuantizeRow, error) {
	var r QuantizeRow
	var p sql.NullFloat64
	err := scan(&r.Kernel, &r.Dtype, &r.M, &r.K, &r.Latency, &p)
	r.Power = p.Float64
	return r, err
}

var computeScaleSQL = sqlTable[QuantizeRow]{name: "perf_compute_scale", cols: quantizeSQLCols, args: quantizeArgs, scan: quantizeScan}

var scaleMatrixSQL = sqlTable[QuantizeRow]{name: "perf_scale_matrix", cols: quantizeSQLCols, args: quantizeArgs, scan: quantizeScan}

// storeSource reads rows of imported files from the store.
type storeSource struct {
	db    sqlx.QueryerContext
	files map[string]storeFile // by relative path
}

type storeFile struct {
	id     int64
	sha256 string
}

func (*storeSource) isRowSource() {}

// loadStoreRows decodes one imported file's rows of kind k from its stored
// Parquet content, after checking the content against its sha256.
func loadStoreRows[R any, K comparable](ctx context.Context, s *storeSource, k *tableKind[R, K], p string) ([]R, string, error) {
	f, ok := s.files[p]
	if !ok {
		return nil, "", fmt.Errorf("store: perf file %s is not imported", p)
	}
	var data []byte
	if err := s.db.QueryRowxContext(ctx, `SELECT content FROM perf_sources WHERE id = ?`, f.id).Scan(&data); err != nil {
		return nil, "", fmt.Errorf("store: read perf file %s: %w", p, err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != f.sha256 {
		return nil, "", fmt.Errorf("store: perf file %s: content does not match its sha256; re-import it with 'aicdb perfdb import'", p)
	}
	t, err := readParquet("store:"+p, data, k.cols)
	if err != nil {
		return nil, "", err
	}
	rows, err := k.fromParquet(t)
	return rows, f.sha256, err
}

// loadMirrorRows reads one file's rows from its perf_* SQL mirror table, in
// file order (used to check that the mirror matches the file).
func loadMirrorRows[R any, K comparable](ctx context.Context, db sqlx.QueryerContext, k *tableKind[R, K], sourceID int64) ([]R, error) {
	q := "SELECT " + strings.Join(k.sql.cols, ", ") + " FROM " + k.sql.name + " WHERE source_id = ? ORDER BY row_idx"
	rows, err := db.QueryContext(ctx, q, sourceID)
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", k.sql.name, err)
	}
	defer rows.Close()
	var out []R
	for rows.Next() {
		r, err := k.sql.scan(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("store: read %s: %w", k.sql.name, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// LoadStore loads the perf data (system, backend, version) sees from the
// store, after `aicdb init` or `aicdb perfdb import`. It gives exactly what
// LoadDir gives on the imported folder: the same resolution runs on the
// imported directory index (perf_dirs, perf_reuse, perf_manifest), and the
// same loader rules on the imported files (perf_sources.content, decoded:
// 5× faster than scanning the perf_* mirror tables, which exist for SQL).
// Options as for LoadDir.
//
// The decoded result is kept in a snapshot beside the store file (snapshot.go)
// and reused by later loads of the same configuration while every stored
// source, the system spec and the executable are unchanged; WithoutSnapshot
// turns that off. A snapshot that cannot be written is skipped silently: the
// data is loaded the same either way.
func LoadStore(ctx context.Context, st *store.Store, system, backend, version string, opts ...LoadOption) (*Data, error) {
	plan, err := resolveLoadOptions(opts)
	if err != nil {
		return nil, err
	}
	tr, src, err := storeTree(ctx, st.DB, system)
	if err != nil {
		return nil, err
	}
	file, key, snap := snapshotTarget(st.Path, tr, src, backend, version, plan)
	if snap {
		if d, ok := readSnapshot(file, key); ok {
			return d, nil
		}
	}
	d, err := assemble(ctx, tr, src, backend, version, plan)
	if err == nil && snap {
		_ = writeSnapshot(file, key, d) // a cache: loading does not depend on it
	}
	return d, err
}

// storeTree rebuilds a system's resolution tree from the store.
func storeTree(ctx context.Context, db *sqlx.DB, system string) (*tree, *storeSource, error) {
	sys, err := storeSystem(ctx, db, system)
	if err != nil {
		return nil, nil, err
	}
	t := &tree{system: sys, dirs: map[dirKey]*dirInfo{}, files: map[string]bool{}}
	rows, err := db.QueryContext(ctx, `SELECT family, backend, version, collection_meta, reuse, incomplete FROM perf_dirs WHERE system = ?`, system)
	if err != nil {
		return nil, nil, fmt.Errorf("store: read perf_dirs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k dirKey
		var meta, reuse sql.NullString
		var inc int
		if err := rows.Scan(&k.family, &k.backend, &k.version, &meta, &reuse, &inc); err != nil {
			return nil, nil, fmt.Errorf("store: read perf_dirs: %w", err)
		}
		d := &dirInfo{incomplete: inc == 1}
		if meta.Valid {
			d.meta = &meta.String
		}
		if reuse.Valid {
			d.reuseText = &reuse.String
		}
		t.dirs[k] = d
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: read perf_dirs: %w", err)
	}
	var reuses []struct {
		Family     string `db:"family"`
		Backend    string `db:"backend"`
		Version    string `db:"version"`
		Table      string `db:"table_name"`
		From       string `db:"from_version"`
		Reason     string `db:"reason"`
		ApprovedBy string `db:"approved_by"`
	}
	if err := db.SelectContext(ctx, &reuses, `SELECT family, backend, version, table_name, from_version, reason, approved_by
		FROM perf_reuse WHERE system = ? ORDER BY family, backend, version, ord`, system); err != nil {
		return nil, nil, fmt.Errorf("store: read perf_reuse: %w", err)
	}
	for _, r := range reuses {
		if d := t.dirs[dirKey{r.Family, r.Backend, r.Version}]; d != nil {
			d.reuse = append(d.reuse, reuseEntry{r.Table, r.From, r.Reason, r.ApprovedBy})
		}
	}
	var mans []struct {
		OpFile     string `db:"op_file"`
		Kernel     string `db:"kernel_source"`
		Tier       string `db:"tier"`
		Frameworks string `db:"frameworks"`
	}
	if err := db.SelectContext(ctx, &mans, `SELECT op_file, kernel_source, tier, frameworks FROM perf_manifest WHERE system = ? ORDER BY ord`, system); err != nil {
		return nil, nil, fmt.Errorf("store: read perf_manifest: %w", err)
	}
	for _, m := range mans {
		e := manifestEntry{OpFile: m.OpFile, KernelSource: m.Kernel, Tier: m.Tier}
		if err := json.Unmarshal([]byte(m.Frameworks), &e.Frameworks); err != nil {
			return nil, nil, fmt.Errorf("store: perf_manifest frameworks %q: %w", m.Frameworks, err)
		}
		t.manifest = append(t.manifest, e)
	}
	var files []struct {
		ID     int64  `db:"id"`
		Path   string `db:"path"`
		SHA256 string `db:"sha256"`
	}
	if err := db.SelectContext(ctx, &files, `SELECT id, path, sha256 FROM perf_sources WHERE system = ?`, system); err != nil {
		return nil, nil, fmt.Errorf("store: read perf_sources: %w", err)
	}
	src := &storeSource{db: db, files: map[string]storeFile{}}
	for _, f := range files {
		t.files[f.Path] = true
		src.files[f.Path] = storeFile{f.ID, f.SHA256}
	}
	return t, src, nil
}

// storeSystem reads one system spec; an unknown system is an error listing the known ones.
func storeSystem(ctx context.Context, db *sqlx.DB, system string) (*System, error) {
	s := &System{Name: system}
	var ncclMem string
	err := db.QueryRowContext(ctx, `SELECT data_dir, mem_bw, mem_bw_empirical_scaling_factor, mem_empirical_constant_latency,
		mem_capacity, bfloat16_tc_flops, int8_tc_flops, fp8_tc_flops, fp4_tc_flops, power, sm_version,
		num_gpus_per_node, inter_node_bw, intra_node_bw, pcie_bw, p2p_latency, num_gpus_per_rack, inter_rack_bw,
		nccl_mem, other_mem, nccl_version FROM systems WHERE name = ?`, system).Scan(
		&s.DataDir, &s.MemBW, &s.MemBWEmpiricalScalingFactor, &s.MemEmpiricalConstantLatency,
		&s.MemCapacity, &s.BF16TCFlops, &s.INT8TCFlops, &s.FP8TCFlops, &s.FP4TCFlops, &s.Power, &s.SMVersion,
		&s.NumGPUsPerNode, &s.InterNodeBW, &s.IntraNodeBW, &s.PCIeBW, &s.P2PLatency, &s.NumGPUsPerRack, &s.InterRackBW,
		&ncclMem, &s.OtherMem, &s.NCCLVersion)
	if err == sql.ErrNoRows {
		names, lerr := ListSystems(ctx, &store.Store{DB: db})
		if lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("system %q: unknown in the store; available: %s (import others with 'aicdb perfdb import')", system, listOrNone(names))
	}
	if err != nil {
		return nil, fmt.Errorf("store: read system %s: %w", system, err)
	}
	var mem map[string]float64
	if err := json.Unmarshal([]byte(ncclMem), &mem); err != nil {
		return nil, fmt.Errorf("store: system %s nccl_mem: %w", system, err)
	}
	s.NCCLMem = map[int]float64{}
	for k, v := range mem {
		n, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("store: system %s nccl_mem key %q: %w", system, k, err)
		}
		s.NCCLMem[n] = v
	}
	return s, nil
}

// ListSystems lists the systems in the store, sorted.
func ListSystems(ctx context.Context, st *store.Store) ([]string, error) {
	var out []string
	if err := st.DB.SelectContext(ctx, &out, `SELECT name FROM systems ORDER BY name`); err != nil {
		return nil, fmt.Errorf("store: list systems: %w", err)
	}
	return out, nil
}

// ListBackends lists the backends with perf data for a system in the store (nccl excluded).
func ListBackends(ctx context.Context, st *store.Store, system string) ([]string, error) {
	bv, err := storeBackendVersions(ctx, st, system)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(bv))
	for b := range bv {
		out = append(out, b)
	}
	sort.Strings(out)
	return out, nil
}

// ListVersions lists a backend's versions for a system in the store, in PEP 440 order.
func ListVersions(ctx context.Context, st *store.Store, system, backend string) ([]string, error) {
	bv, err := storeBackendVersions(ctx, st, system)
	if err != nil {
		return nil, err
	}
	return bv[backend], nil
}

func storeBackendVersions(ctx context.Context, st *store.Store, system string) (map[string][]string, error) {
	var rows []struct {
		Family  string `db:"family"`
		Backend string `db:"backend"`
		Version string `db:"version"`
	}
	if err := st.DB.SelectContext(ctx, &rows, `SELECT family, backend, version FROM perf_dirs WHERE system = ?`, system); err != nil {
		return nil, fmt.Errorf("store: list versions: %w", err)
	}
	t := &tree{dirs: map[dirKey]*dirInfo{}}
	for _, r := range rows {
		t.dirs[dirKey{r.Family, r.Backend, r.Version}] = &dirInfo{}
	}
	return t.backendVersions(), nil
}
