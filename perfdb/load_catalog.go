package perfdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// VersionInfo describes one imported (system, backend, version): how many
// tables and perf rows its own directories hold (before the shared layer).
type VersionInfo struct {
	System, Backend, Version string
	Tables, Rows             int
}

// ListVersionInfo lists every imported (system, backend, version), NCCL
// included (backend "nccl"), ordered by system, backend and PEP 440 version.
func ListVersionInfo(ctx context.Context, st *store.Store) ([]VersionInfo, error) {
	rows, err := st.PerfVersionCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list versions: %w", err)
	}
	out := make([]VersionInfo, len(rows))
	for i, r := range rows {
		out[i] = VersionInfo{r.System, r.Backend, r.Version, r.Tables, r.Rows}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.System != b.System {
			return a.System < b.System
		}
		if a.Backend != b.Backend {
			return a.Backend < b.Backend
		}
		return CompareVersions(a.Version, b.Version) < 0
	})
	return out, nil
}

// SystemInfo summarises one system of the store.
type SystemInfo struct {
	Name, DataDir, NCCLVersion string
	GPUsPerNode                int
	MemCapacity                float64 // bytes
	Backends                   []string
}

// ListSystemInfo lists the systems of the store with their backends, by name.
func ListSystemInfo(ctx context.Context, st *store.Store) ([]SystemInfo, error) {
	rows, err := st.SystemSummaries(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list systems: %w", err)
	}
	out := make([]SystemInfo, len(rows))
	for i, r := range rows {
		bs, err := ListBackends(ctx, st, r.Name)
		if err != nil {
			return nil, err
		}
		out[i] = SystemInfo{Name: r.Name, DataDir: r.DataDir, NCCLVersion: r.NCCLVersion, GPUsPerNode: r.GPUs, MemCapacity: r.Mem, Backends: bs}
	}
	return out, nil
}

// ModelInfo is one row of the store's models table.
type ModelInfo = store.ModelRow

// ListModels lists the store's models by id.
func ListModels(ctx context.Context, st *store.Store) ([]ModelInfo, error) {
	out, err := st.Models(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list models: %w", err)
	}
	return out, nil
}

// LoadModel returns a stored model, re-parsed from its stored config.json
// (and hf_quant_config.json) by ParseHFConfig, so parser refinements apply to
// models imported earlier. An unknown id is an error listing the known ones.
func LoadModel(ctx context.Context, st *store.Store, id string) (*Model, error) {
	cfg, q, err := st.ModelConfig(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		ids, lerr := st.ModelIDs(ctx)
		if lerr != nil {
			return nil, fmt.Errorf("store: list models: %w", lerr)
		}
		if s, ok := SuggestModel(id, ids); ok {
			return nil, fmt.Errorf("model %q: unknown in the store; did you mean %s?", id, s)
		}
		return nil, fmt.Errorf("model %q: unknown in the store; available: %s (import others with 'aicdb perfdb import')", id, listOrNone(ids))
	}
	if err != nil {
		return nil, fmt.Errorf("store: read model %s: %w", id, err)
	}
	return ParseHFConfig(id, "store:models/"+id, []byte(cfg), q)
}

// EmbeddedModel returns a model of the embedded configs by id ("org/name").
// An unknown id is an error listing the known ones.
func EmbeddedModel(id string) (*Model, error) {
	fsys := EmbeddedFS()
	files, err := modelFilesFS(subOrEmpty(fsys, "model_configs"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, f := range files {
		mid := modelIDFromFile(f)
		ids = append(ids, mid)
		if mid != id {
			continue
		}
		stem := strings.TrimSuffix(f, "_config.json")
		cfg, err := readEmbedded("model_configs/" + f)
		if err != nil {
			return nil, err
		}
		q, _ := readEmbedded("model_configs/" + stem + "_hf_quant_config.json")
		return ParseHFConfig(id, "embedded:model_configs/"+f, cfg, q)
	}
	return nil, fmt.Errorf("model %q: unknown in the embedded configs; available: %s", id, listOrNone(ids))
}
