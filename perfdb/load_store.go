package perfdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/aicdb/aicdb/store"
)

// sqlTable maps a row type to its store table (migrations/00002_perf.sql).
// Every perf table starts with source_id, row_idx, system, backend, version.
type sqlTable[R any] struct {
	name string
	cols []string                                      // the row's own columns, in order
	args func(dst []any, r *R, power any) []any        // appends the values of cols to dst; power is nil when the file has none
	scan func(scan func(dest ...any) error) (R, error) // reads cols (a NULL power → 0)
}

var gemmSQL = sqlTable[GemmRow]{
	name: "perf_gemm",
	cols: []string{"kernel_source", "gemm_dtype", "m", "n", "k", "latency", "power"},
	args: func(dst []any, r *GemmRow, p any) []any {
		return append(dst, r.Kernel, r.Dtype, r.M, r.N, r.K, r.Latency, p)
	},
	scan: func(scan func(...any) error) (GemmRow, error) {
		var r GemmRow
		var p *float64
		err := scan(&r.Kernel, &r.Dtype, &r.M, &r.N, &r.K, &r.Latency, &p)
		r.Power = nullFloat(p)
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
	var p *float64
	err := scan(&r.Kernel, &r.AttnDtype, &r.KVDtype, &r.NumHeads, &r.NumKVHeads, &r.HeadDim, &r.Window, &r.ISL, &r.Step, &r.Batch, &r.Latency, &p)
	r.Power = nullFloat(p)
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
		var p *float64
		err := scan(&r.Kernel, &r.Dtype, &r.NumGPUs, &r.MessageSize, &r.Latency, &p, &r.Impl)
		r.Power = nullFloat(p)
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
		var p *float64
		err := scan(&r.Kernel, &r.Dtype, &r.Op, &r.NumGPUs, &r.MessageSize, &r.Latency, &p)
		r.Power = nullFloat(p)
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
		var p *float64
		err := scan(&r.Kernel, &r.Dtype, &r.Distribution, &r.TopK, &r.NumExperts, &r.Hidden, &r.Inter, &r.MoETP, &r.MoEEP, &r.NumTokens, &r.Latency, &p)
		r.Power = nullFloat(p)
		return r, err
	},
}

var quantizeSQLCols = []string{"kernel_source", "quant_dtype", "m", "k", "latency", "power"}

func quantizeArgs(dst []any, r *QuantizeRow, p any) []any {
	return append(dst, r.Kernel, r.Dtype, r.M, r.K, r.Latency, p)
}

func quantizeScan(scan func(...any) error) (QuantizeRow, error) {
	var r QuantizeRow
	var p *float64
	err := scan(&r.Kernel, &r.Dtype, &r.M, &r.K, &r.Latency, &p)
	r.Power = nullFloat(p)
	return r, err
}

var computeScaleSQL = sqlTable[QuantizeRow]{name: "perf_compute_scale", cols: quantizeSQLCols, args: quantizeArgs, scan: quantizeScan}

var scaleMatrixSQL = sqlTable[QuantizeRow]{name: "perf_scale_matrix", cols: quantizeSQLCols, args: quantizeArgs, scan: quantizeScan}

// nullFloat is the value of a nullable column, 0 when NULL.
func nullFloat(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// perfContent reads an imported perf file's stored content (store.Store).
type perfContent interface {
	PerfContent(ctx context.Context, id int64) ([]byte, error)
}

// storeSource reads rows of imported files from the store.
type storeSource struct {
	db    perfContent
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
	data, err := s.db.PerfContent(ctx, f.id)
	if err != nil {
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
func loadMirrorRows[R any, K comparable](ctx context.Context, st *store.Store, k *tableKind[R, K], sourceID int64) ([]R, error) {
	var out []R
	err := st.MirrorRows(ctx, k.sql.name, k.sql.cols, sourceID, func(scan func(...any) error) error {
		r, err := k.sql.scan(scan)
		out = append(out, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", k.sql.name, err)
	}
	return out, nil
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
	tr, src, err := storeTree(ctx, st, system)
	if err != nil {
		return nil, err
	}
	file, key, snap := snapshotTarget(st.Path, tr, src, backend, version, plan)
	if snap {
		if d, ok := readSnapshot(file, key); ok {
			return d, nil
		}
		// A table selection (a model's tables) is derived from a valid snapshot
		// of every table when there is one (WarmSnapshots, `aicdb init`) rather
		// than decoded, its other tables passed over; not written again (a
		// read of it costs what a read of the selection's own snapshot does).
		every := plan
		every.tables = nil
		if plan.tables != nil {
			if afile, akey, ok := snapshotTarget(st.Path, tr, src, backend, version, every); ok {
				if d, ok := readSnapshotOnly(afile, akey, plan); ok {
					return d, nil
				}
			}
		}
	}
	d, err := assemble(ctx, tr, src, backend, version, plan)
	if err == nil && snap {
		_ = writeSnapshot(file, key, d) // a cache: loading does not depend on it
	}
	return d, err
}

// storeTree rebuilds a system's resolution tree from the store.
func storeTree(ctx context.Context, st *store.Store, system string) (*tree, *storeSource, error) {
	sys, err := storeSystem(ctx, st, system)
	if err != nil {
		return nil, nil, err
	}
	ix, err := st.PerfIndex(ctx, system)
	if err != nil {
		return nil, nil, err
	}
	t := &tree{system: sys, dirs: map[dirKey]*dirInfo{}, files: map[string]bool{}}
	for _, d := range ix.Dirs {
		t.dirs[dirKey{d.Family, d.Backend, d.Version}] = &dirInfo{meta: d.CollectionMeta, reuseText: d.Reuse, incomplete: d.Incomplete}
	}
	for _, r := range ix.Reuse {
		if d := t.dirs[dirKey{r.Family, r.Backend, r.Version}]; d != nil {
			d.reuse = append(d.reuse, reuseEntry{r.Table, r.From, r.Reason, r.ApprovedBy})
		}
	}
	for _, m := range ix.Manifest {
		e := manifestEntry{OpFile: m.OpFile, KernelSource: m.Kernel, Tier: m.Tier}
		if err := json.Unmarshal([]byte(m.Frameworks), &e.Frameworks); err != nil {
			return nil, nil, fmt.Errorf("store: perf_manifest frameworks %q: %w", m.Frameworks, err)
		}
		t.manifest = append(t.manifest, e)
	}
	src := &storeSource{db: st, files: map[string]storeFile{}}
	for _, f := range ix.Files {
		t.files[f.Path] = true
		src.files[f.Path] = storeFile{f.ID, f.SHA256}
	}
	return t, src, nil
}

// storeSystem reads one system spec; an unknown system is an error listing the known ones.
func storeSystem(ctx context.Context, st *store.Store, system string) (*System, error) {
	r, err := st.System(ctx, system)
	if errors.Is(err, store.ErrNotFound) {
		names, lerr := ListSystems(ctx, st)
		if lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("system %q: unknown in the store; available: %s (import others with 'aicdb perfdb import')", system, listOrNone(names))
	}
	if err != nil {
		return nil, fmt.Errorf("store: read system %s: %w", system, err)
	}
	s := &System{Name: system, DataDir: r.DataDir, MemBW: r.MemBW, MemBWEmpiricalScalingFactor: r.MemBWEmpiricalScalingFactor,
		MemEmpiricalConstantLatency: r.MemEmpiricalConstantLatency, MemCapacity: r.MemCapacity, BF16TCFlops: r.BF16TCFlops,
		INT8TCFlops: r.INT8TCFlops, FP8TCFlops: r.FP8TCFlops, FP4TCFlops: r.FP4TCFlops, Power: r.Power, SMVersion: r.SMVersion,
		NumGPUsPerNode: r.NumGPUsPerNode, InterNodeBW: r.InterNodeBW, IntraNodeBW: r.IntraNodeBW, PCIeBW: r.PCIeBW,
		P2PLatency: r.P2PLatency, NumGPUsPerRack: r.NumGPUsPerRack, InterRackBW: r.InterRackBW, OtherMem: r.OtherMem,
		NCCLVersion: r.NCCLVersion}
	var mem map[string]float64
	if err := json.Unmarshal([]byte(r.NCCLMem), &mem); err != nil {
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
	out, err := st.SystemNames(ctx)
	if err != nil {
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
	rows, err := st.PerfDirKeys(ctx, system)
	if err != nil {
		return nil, fmt.Errorf("store: list versions: %w", err)
	}
	t := &tree{dirs: map[dirKey]*dirInfo{}}
	for _, r := range rows {
		t.dirs[dirKey{r.Family, r.Backend, r.Version}] = &dirInfo{}
	}
	return t.backendVersions(), nil
}

// servingBackends are the backends whose perf data estimates load (nccl is a
// communication library, read through the system's nccl_version).
var servingBackends = []string{"vllm", "trtllm", "sglang"}

// WarmSnapshots builds, for each serving backend of system, the snapshot of
// every table of its newest version under the shared layer (what `eval`,
// `estimate` and `sweep` load when no --version is given, in the default
// silicon mode), unless a valid one is there. A later load of that version —
// every table, or a model's selection, derived from it — then reads the
// snapshot instead of decoding the stored Parquet (~0.4 s on the first call).
// It returns the "backend version" pairs warmed (none when the store is not a
// plain file, which keeps no snapshots).
func WarmSnapshots(ctx context.Context, st *store.Store, system string) ([]string, error) {
	if !cacheableStore(st.Path) {
		return nil, nil
	}
	tr, src, err := storeTree(ctx, st, system)
	if err != nil {
		return nil, err
	}
	plan, err := resolveLoadOptions(nil) // every table, the shared layer: what LoadStore loads without options
	if err != nil {
		return nil, err
	}
	bv := tr.backendVersions()
	var warmed []string
	for _, b := range servingBackends {
		v, _, ok := NearestVersion("", bv[b])
		if !ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return warmed, err
		}
		file, key, ok := snapshotTarget(st.Path, tr, src, b, v, plan)
		if !ok {
			continue
		}
		if !snapshotCurrent(file, key) {
			d, err := assemble(ctx, tr, src, b, v, plan)
			if err != nil {
				return warmed, fmt.Errorf("warm the perf-data snapshot of %s %s %s: %w", system, b, v, err)
			}
			if writeSnapshot(file, key, d) != nil {
				continue // an unwritable folder keeps nothing, and nothing is named
			}
		}
		warmed = append(warmed, b+" "+v)
	}
	return warmed, nil
}

// snapshotCurrent reports whether file is a sound snapshot of key (openFrame:
// header, length and CRC), without decoding it.
func snapshotCurrent(file string, key [32]byte) bool {
	b, unmap, err := mapSnapshot(file)
	if err != nil {
		return false
	}
	defer unmap()
	_, ok := openFrame(b, snapshotMagic, key)
	return ok
}
