package perfdb

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// siteRows draws GEMM points as TestSiteIndexMatchesDictWalk does.
func siteRows(t *rapid.T) []gemmPoint {
	dim := rapid.SampledFrom([]int{1, 2, 16, 64, 4096, 7168})
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) gemmPoint {
		return gemmPoint{m: rapid.IntRange(1, 6).Draw(t, "m"), n: dim.Draw(t, "n"), k: dim.Draw(t, "k"),
			l: newLeaf(rapid.Float64Range(0.001, 10).Draw(t, "lat"), rapid.Float64Range(0, 700).Draw(t, "power"))}
	}), 0, 60).Draw(t, "rows")
}

func TestSiteIndexFileRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rows := siteRows(t)
		want := buildSiteIndex(rows)
		key, _ := siteIndexKey(rows)
		b := encodeSiteIndex(want, key)
		got, err := decodeSiteIndex(b[snapshotHeaderFor(siteIndexMagic):])
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded index differs\ngot  %+v\nwant %+v", got, want)
		}
		// Any truncation is rejected, never a panic.
		if n := rapid.IntRange(0, len(b)-1).Draw(t, "cut"); n > snapshotHeaderFor(siteIndexMagic) {
			if _, err := decodeSiteIndex(b[snapshotHeaderFor(siteIndexMagic):n]); err == nil {
				t.Fatalf("a payload cut at %d of %d bytes decoded", n, len(b))
			}
		}
	})
}

func TestCachedSiteIndex(t *testing.T) {
	dir := t.TempDir()
	rows := []gemmPoint{{m: 1, n: 64, k: 64, l: newLeaf(0.1, 300)}, {m: 8, n: 64, k: 64, l: newLeaf(0.2, 310)},
		{m: 1, n: 128, k: 64, l: newLeaf(0.15, 0)}, {m: 1, n: 64, k: 64, l: newLeaf(9, 9)}}
	want := buildSiteIndex(rows)
	if got := cachedSiteIndex(dir, rows); !reflect.DeepEqual(got, want) {
		t.Fatalf("first call (builds, writes): %+v, want %+v", got, want)
	}
	key, name := siteIndexKey(rows)
	file := siteIndexFile(dir, name)
	if _, ok := readSiteIndex(file, key); !ok {
		t.Fatalf("%s was not written as a sound index file", file)
	}
	if got := cachedSiteIndex(dir, rows); !reflect.DeepEqual(got, want) {
		t.Fatalf("second call (reads): %+v, want %+v", got, want)
	}
	// Another input has another key: the file is not read for it.
	other := append([]gemmPoint(nil), rows...)
	other[0].l.lat = 0.11
	otherKey, otherName := siteIndexKey(other)
	if otherName == name {
		t.Fatal("two inputs share a file name")
	}
	if _, ok := readSiteIndex(file, otherKey); ok {
		t.Fatal("an index file was accepted for another input")
	}
	// A corrupt file is ignored and rewritten.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := readSiteIndex(file, key); ok {
		t.Fatal("a corrupt index file was accepted")
	}
	if got := cachedSiteIndex(dir, rows); !reflect.DeepEqual(got, want) {
		t.Fatalf("after corruption: %+v, want %+v", got, want)
	}
	if _, ok := readSiteIndex(file, key); !ok {
		t.Fatal("the corrupt index file was not rewritten")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func TestIndexCacheDir(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.sqlite")
	if got := IndexCacheDir(db); got != "" {
		t.Fatalf("IndexCacheDir of a missing store = %q, want \"\"", got)
	}
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := IndexCacheDir(db), db+".perfcache"; executableID() != "" && got != want {
		t.Fatalf("IndexCacheDir = %q, want %q", got, want)
	}
	if got := IndexCacheDir(":memory:"); got != "" {
		t.Fatalf("IndexCacheDir(:memory:) = %q, want \"\"", got)
	}
}

// FuzzDecodeSiteIndex feeds arbitrary payloads to the site-index decoder: it
// must reject or decode them without panicking, and a decoded index must have
// one byKey entry per site.
func FuzzDecodeSiteIndex(f *testing.F) {
	rows := []gemmPoint{{m: 1, n: 64, k: 64, l: newLeaf(0.1, 300)}, {m: 8, n: 128, k: 64, l: newLeaf(0.2, 310)}}
	key, _ := siteIndexKey(rows)
	b := encodeSiteIndex(buildSiteIndex(rows), key)
	f.Add(b[snapshotHeaderFor(siteIndexMagic):])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		idx, err := decodeSiteIndex(payload)
		if err != nil {
			return
		}
		if len(idx.byKey) != len(idx.sites) {
			t.Fatalf("%d byKey entries for %d sites", len(idx.byKey), len(idx.sites))
		}
	})
}
