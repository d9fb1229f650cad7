package perfdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// fileImporter parses one Parquet file of a table kind and inserts its rows.
type fileImporter interface {
	// mirror names the SQL mirror table and its own columns ("" when the
	// table is stored as file content only).
	mirror() (table string, cols []string)
	// parse reads the file; rows is the row count, insert writes them.
	parse(name string, data []byte) (rows int, insert func(ctx context.Context, stmt *store.MirrorInsert, srcID int64, system, backend, version string) error, err error)
}

type kindImporter[R any, K comparable] struct{ k *tableKind[R, K] }

func (ki kindImporter[R, K]) mirror() (string, []string) {
	return ki.k.sql.name, ki.k.sql.cols
}

func (ki kindImporter[R, K]) parse(name string, data []byte) (int, func(context.Context, *store.MirrorInsert, int64, string, string, string) error, error) {
	t, err := readParquet(name, data, ki.k.cols)
	if err != nil {
		return 0, nil, err
	}
	rows, err := ki.k.fromParquet(t)
	if err != nil {
		return 0, nil, err
	}
	hasPower := t.hasCol("power")
	if ki.k.sql.name == "" {
		return len(rows), func(context.Context, *store.MirrorInsert, int64, string, string, string) error { return nil }, nil
	}
	insert := func(ctx context.Context, stmt *store.MirrorInsert, srcID int64, system, backend, version string) error {
		// One prepared statement per row: measured cheaper in CPU than
		// json_each batches (13.5 s vs 19.6 s user for the h200 slice).
		args := make([]any, 0, 5+len(ki.k.sql.cols))
		// The driver starts a cancellation watcher (a goroutine and a progress
		// handler) for every statement run with a cancellable context, which
		// doubled the import's CPU time; rows run uncancellable and the
		// context is checked every 4096 rows instead.
		ectx := context.WithoutCancel(ctx)
		for i := range rows {
			if i%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			var p any
			if hasPower {
				p = powerOf(&rows[i])
			}
			args = ki.k.sql.args(append(args[:0], srcID, i, system, backend, version), &rows[i], p)
			if err := stmt.Exec(ectx, args...); err != nil {
				return fmt.Errorf("store: insert row %d of %s: %w", i, name, err)
			}
		}
		return nil
	}
	return len(rows), insert, nil
}

// powerOf returns a row's power (W).
func powerOf(r any) float64 {
	switch r := r.(type) {
	case *GemmRow:
		return r.Power
	case *AttentionRow:
		return r.Power
	case *AllReduceRow:
		return r.Power
	case *NCCLRow:
		return r.Power
	case *MoERow:
		return r.Power
	case *QuantizeRow:
		return r.Power
	}
	return 0
}

// importers maps table stems to their importers.
var importers = map[string]fileImporter{
	gemmKind.stem:                kindImporter[GemmRow, gemmKey]{gemmKind},
	contextAttentionKind.stem:    kindImporter[AttentionRow, ctxAttnKey]{contextAttentionKind},
	generationAttentionKind.stem: kindImporter[AttentionRow, genAttnKey]{generationAttentionKind},
	allReduceKind.stem:           kindImporter[AllReduceRow, allReduceKey]{allReduceKind},
	ncclKind.stem:                kindImporter[NCCLRow, ncclKey]{ncclKind},
	moeKind.stem:                 kindImporter[MoERow, moeKey]{moeKind},
	computeScaleKind.stem:        kindImporter[QuantizeRow, quantKey]{computeScaleKind},
	scaleMatrixKind.stem:         kindImporter[QuantizeRow, quantKey]{scaleMatrixKind},
	// MLA module tables have no SQL mirror (no migration): the store keeps
	// their Parquet content, which LoadStore decodes like any other file.
	mlaContextModuleKind.stem:    kindImporter[MLAModuleRow, mlaModuleKey]{mlaContextModuleKind},
	mlaGenerationModuleKind.stem: kindImporter[MLAModuleRow, mlaModuleKey]{mlaGenerationModuleKind},
	mlaContextKind.stem:          kindImporter[MLARow, mlaKey]{mlaContextKind},
	mlaGenerationKind.stem:       kindImporter[MLARow, mlaKey]{mlaGenerationKind},
	mlaBmmKind.stem:              kindImporter[MLABmmRow, mlaBmmKey]{mlaBmmKind},
	dsaContextKind.stem:          kindImporter[DSARow, *DSARow]{dsaContextKind},
	dsaGenerationKind.stem:       kindImporter[DSARow, *DSARow]{dsaGenerationKind},
	gdnKind.stem:                 kindImporter[GDNRow, gdnKey]{gdnKind},
	// Wide-EP tables (wideep_tables.go): content only, no SQL mirror.
	deepEPNormalKind.stem:        kindImporter[DeepEPRow, deepEPKey]{deepEPNormalKind},
	deepEPLLKind.stem:            kindImporter[DeepEPRow, deepEPKey]{deepEPLLKind},
	wideEPContextMoEKind.stem:    kindImporter[MoERow, moeKey]{wideEPContextMoEKind},
	wideEPGenerationMoEKind.stem: kindImporter[MoERow, moeKey]{wideEPGenerationMoEKind},
	wideEPContextMLAKind.stem:    kindImporter[MLAModuleRow, wideEPMLAKey]{wideEPContextMLAKind},
	wideEPGenerationMLAKind.stem: kindImporter[MLAModuleRow, wideEPMLAKey]{wideEPGenerationMLAKind},
}

// importFiles imports the tree's table files: unchanged files (same sha256)
// are skipped, changed ones replaced, files no longer present removed.
func importFiles(ctx context.Context, tx *store.PerfTx, fsys fs.FS, label string, tr *tree, o ImportOptions, rep *ImportReport) error {
	system := tr.system.Name
	srcs, err := tx.PerfSources(system)
	if err != nil {
		return err
	}
	existing := make(map[string]store.PerfSourceState, len(srcs))
	for _, h := range srcs {
		existing[h.Path] = h
	}
	paths := make([]string, 0, len(tr.files))
	for p := range tr.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	stmts := map[string]*store.MirrorInsert{}
	stmtFor := func(stem string, imp fileImporter) (*store.MirrorInsert, error) {
		if s := stmts[stem]; s != nil {
			return s, nil
		}
		table, cols := imp.mirror()
		if table == "" {
			return nil, nil // content-only table: nothing to mirror
		}
		s, err := tx.PrepareMirrorInsert(table, cols)
		if err != nil {
			return nil, fmt.Errorf("store: prepare insert for %s: %w", stem, err)
		}
		stmts[stem] = s
		return s, nil
	}
	defer func() {
		for _, s := range stmts {
			s.Close()
		}
	}()
	// Files are read, hashed and decoded one ahead of the store writes, on a
	// second goroutine (the two halves take similar time with the mirror).
	root := path.Clean(tr.system.DataDir)
	type prepared struct {
		p, fam, be, ver, stem, name string
		imp                         fileImporter
		data                        []byte
		sha                         string
		parsed                      bool
		n                           int
		insert                      func(context.Context, *store.MirrorInsert, int64, string, string, string) error
		err                         error
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := make(chan *prepared, 1)
	go func() {
		defer close(ch)
		for _, p := range paths {
			f := &prepared{p: p}
			rel := strings.Split(strings.TrimPrefix(p, root+"/"), "/")
			if len(rel) != 4 {
				f.err = fmt.Errorf("internal: unexpected perf file path %s", p)
			} else {
				f.fam, f.be, f.ver, f.stem = rel[0], rel[1], rel[2], strings.TrimSuffix(rel[3], ".parquet")
				f.imp, f.name = importers[f.stem], path.Join(label, p)
				if f.data, f.err = fs.ReadFile(fsys, p); f.err != nil {
					f.err = fmt.Errorf("parquet file %s: %w", f.name, f.err)
				}
			}
			if f.err == nil {
				sum := sha256.Sum256(f.data)
				f.sha = hex.EncodeToString(sum[:])
				h, ok := existing[p]
				if !ok || h.SHA256 != f.sha || (!h.Mirrored && !o.NoMirror) {
					f.parsed = true
					f.n, f.insert, f.err = f.imp.parse(f.name, f.data)
				}
			}
			select {
			case ch <- f:
			case <-pctx.Done():
				return
			}
			if f.err != nil {
				return
			}
		}
	}()
	seen := map[string]bool{}
	done := 0
	for f := range ch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.err != nil {
			return f.err
		}
		if done++; o.Progress != nil && done > 1 {
			o.Progress(system, done-1, len(paths)) // the files before this one are stored
		}
		p, be, ver, stem, name := f.p, f.be, f.ver, f.stem, f.name
		seen[p] = true
		if h, ok := existing[p]; ok {
			if !f.parsed { // unchanged, and its mirror state is as wanted
				rep.FilesSkipped++
				continue
			}
			if h.SHA256 == f.sha { // unchanged, but its mirror is wanted now
				stmt, err := stmtFor(stem, f.imp)
				if err != nil {
					return err
				}
				if err := f.insert(ctx, stmt, h.ID, system, be, ver); err != nil {
					return err
				}
				if err := tx.SetPerfMirrored(h.ID); err != nil {
					return fmt.Errorf("store: perf source %s: %w", name, err)
				}
				rep.FilesSkipped++
				rep.Rows += f.n
				continue
			}
			if err := tx.DeletePerfSource(h.ID); err != nil {
				return fmt.Errorf("store: replace %s: %w", name, err)
			}
		}
		id, err := tx.InsertPerfSource(store.PerfSource{System: system, Family: f.fam, Backend: be, Version: ver, Table: stem,
			Path: p, SHA256: f.sha, Rows: f.n, ImportedAt: o.ImportedAt, Mirrored: !o.NoMirror, Content: f.data})
		if err != nil {
			return fmt.Errorf("store: perf source %s: %w", name, err)
		}
		rep.Files++
		if o.NoMirror {
			continue
		}
		stmt, err := stmtFor(stem, f.imp)
		if err != nil {
			return err
		}
		if err := f.insert(ctx, stmt, id, system, be, ver); err != nil {
			return err
		}
		rep.Rows += f.n
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.Progress != nil && done > 0 {
		o.Progress(system, done, len(paths))
	}
	stale := make([]string, 0)
	for p := range existing {
		if !seen[p] {
			stale = append(stale, p)
		}
	}
	sort.Strings(stale)
	for _, p := range stale {
		if err := tx.DeletePerfSource(existing[p].ID); err != nil {
			return fmt.Errorf("store: remove %s: %w", p, err)
		}
		rep.FilesRemoved++
	}
	return nil
}
