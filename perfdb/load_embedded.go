package perfdb

import (
	"context"
	"embed"
	"io/fs"

	"github.com/aicdb/aicdb/store"
)

// embeddedData holds the default perf data shipped in the binary: aiconfigurator's
// h200_sxm slice (systems/) and its HF model configs (model_configs/), in
// aiconfigurator_core's relative layout. See embedded/PROVENANCE.md and
// embedded/LICENSE.aiconfigurator (Apache-2.0).
//
//go:embed embedded
var embeddedData embed.FS

// EmbeddedFS returns the embedded data root (systems/, model_configs/,
// PROVENANCE.md, LICENSE.aiconfigurator).
func EmbeddedFS() fs.FS {
	sub, err := fs.Sub(embeddedData, "embedded")
	if err != nil { // cannot happen: the directory is embedded
		panic(err)
	}
	return sub
}

// LoadEmbedded is LoadDir on the embedded systems folder: no store, no files.
// Options as for LoadDir.
func LoadEmbedded(ctx context.Context, system, backend, version string, opts ...LoadOption) (*Data, error) {
	sys, err := fs.Sub(EmbeddedFS(), "systems")
	if err != nil {
		return nil, err
	}
	return loadFS(ctx, sys, "embedded:systems", system, backend, version, opts)
}

// ImportEmbedded imports the embedded data (systems and model configs) into
// the store in one transaction; re-running it is idempotent. `aicdb init` uses it.
func ImportEmbedded(ctx context.Context, st *store.Store, o ImportOptions) (*ImportReport, error) {
	return ImportFS(ctx, st, EmbeddedFS(), "embedded", o)
}

// readEmbedded reads one file of the embedded data root.
func readEmbedded(name string) ([]byte, error) { return fs.ReadFile(EmbeddedFS(), name) }

// subOrEmpty returns fs.Sub(fsys, dir), or an empty file system on error.
func subOrEmpty(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return emptyFS{}
	}
	return sub
}

// emptyFS is a file system with no files (production code keeps testing/fstest out).
type emptyFS struct{}

// Open implements fs.FS: every name is missing.
func (emptyFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadDir implements fs.ReadDirFS: the root is an empty folder.
func (emptyFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name == "." {
		return nil, nil
	}
	return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
}

// EmbeddedSystems lists the systems of the embedded data.
func EmbeddedSystems() ([]string, error) { return systemNamesFS(subOrEmpty(EmbeddedFS(), "systems")) }

// EmbeddedVersions lists a backend's versions of an embedded system, in PEP 440 order.
func EmbeddedVersions(system, backend string) ([]string, error) {
	bv, err := EmbeddedBackendVersions(system)
	if err != nil {
		return nil, err
	}
	return bv[backend], nil
}

// EmbeddedBackendVersions lists an embedded system's versions by backend (vllm,
// trtllm, sglang; not the collective libraries), each in PEP 440 order.
func EmbeddedBackendVersions(system string) (map[string][]string, error) {
	return backendVersionsFS(subOrEmpty(EmbeddedFS(), "systems"), "embedded:systems", system)
}

// EmbeddedModels lists the ids ("org/name") of the embedded model configs, sorted.
func EmbeddedModels() ([]string, error) {
	files, err := modelFilesFS(subOrEmpty(EmbeddedFS(), "model_configs"))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(files))
	for i, f := range files {
		ids[i] = modelIDFromFile(f)
	}
	return ids, nil
}
