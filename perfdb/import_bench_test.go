package perfdb

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// hideFS hides some root entries of a file system (here: other systems).
type hideFS struct {
	fs.FS
	hide map[string]bool
}

func (h hideFS) Open(name string) (fs.File, error) {
	if h.hide[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return h.FS.Open(name)
}

func (h hideFS) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, err := fs.ReadDir(h.FS, name)
	if err != nil || name != "." {
		return ents, err
	}
	var out []fs.DirEntry
	for _, e := range ents {
		if !h.hide[e.Name()] {
			out = append(out, e)
		}
	}
	return out, nil
}

func benchStore(b *testing.B) *store.Store {
	b.Helper()
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "bench.sqlite"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkImportH200 imports the whole h200_sxm slice of the shared data
// (every file aicdb imports, SQL mirror included) into a fresh store. Target < 20 s.
func BenchmarkImportH200(b *testing.B) {
	dir := sharedSystemsDir(b)
	fsys := hideFS{os.DirFS(dir), map[string]bool{"b200_sxm.yaml": true}}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st := benchStore(b)
		b.StartTimer()
		rep, err := ImportFS(context.Background(), st, fsys, dir, ImportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.Rows), "rows")
		st.Close()
	}
}

// BenchmarkInit is `aicdb init` on a fresh store: the embedded data imported
// without the perf_* SQL mirror (the default) and with it (--mirror). Target < 10 s.
func BenchmarkInit(b *testing.B) {
	for _, c := range []struct {
		name     string
		noMirror bool
	}{{"default", true}, {"mirror", false}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				st := benchStore(b)
				b.StartTimer()
				if _, err := ImportEmbedded(context.Background(), st, ImportOptions{NoMirror: c.noMirror}); err != nil {
					b.Fatal(err)
				}
				st.Close()
			}
		})
	}
}

// BenchmarkLoadH200Vllm022 loads the data an estimate needs, from the
// embedded folder and from the store.
func BenchmarkLoadH200Vllm022(b *testing.B) {
	ctx := context.Background()
	b.Run("embedded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := LoadEmbedded(ctx, "h200_sxm", "vllm", "0.22.0"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("store", func(b *testing.B) {
		st := benchStore(b)
		defer st.Close()
		if _, err := ImportEmbedded(ctx, st, ImportOptions{NoMirror: true}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := LoadStore(ctx, st, "h200_sxm", "vllm", "0.22.0"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
