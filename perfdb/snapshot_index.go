package perfdb

// snapshot_index.go keeps built GEMM site indexes (buildSiteIndex, the
// largest fixed cost of a warm single-point process after the snapshot of
// Data) in files beside the store's Data snapshots, one per index input:
// <store>.perfcache/gemm-<key>.idx.
//
// Validity: the key hashes the index's whole input (the dtype's points after
// the SOL floor, as raw bytes), the file format and the running executable
// (whose buildSiteIndex may differ), so a file is only ever read for the exact
// rows and code that wrote it; a file of another key, truncated or corrupt
// (CRC-32C) is ignored and rewritten. The file is named by the input alone, so
// a new executable replaces its files; files of inputs no longer in the store
// stay until the folder is deleted: the folder is a pure cache.

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"unsafe"
)

// siteIndexMagic starts every site-index file; bump it when the layout changes.
const siteIndexMagic = "aicdb gemm site index 1\n"

// IndexCacheDir is the folder where a querier of data loaded from the store
// file at storePath keeps built indexes (NewQuerierWithIndexCache), or ""
// (no cache) for a store that is not a plain file or an unknown executable.
func IndexCacheDir(storePath string) string {
	if !cacheableStore(storePath) {
		return ""
	}
	return snapshotDir(storePath)
}

// NewQuerierWithIndexCache is NewQuerier whose GEMM site indexes are read
// from, or written to, cacheDir (IndexCacheDir; "" for none). Answers are the
// same either way.
func NewQuerierWithIndexCache(d *Data, mode DatabaseMode, cacheDir string) (*Querier, error) {
	q, err := NewQuerier(d, mode)
	if err != nil {
		return nil, err
	}
	for _, gt := range q.gemm {
		gt.cacheDir = cacheDir
	}
	return q, nil
}

// siteIndexKey hashes the input of buildSiteIndex with the file format and
// the executable (key); name hashes the input alone and names the file, so a
// rebuilt executable rewrites its inputs' files instead of adding new ones.
func siteIndexKey(rows []gemmPoint) (key, name [32]byte) {
	h := sha256.New()
	if len(rows) > 0 {
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&rows[0])), len(rows)*int(unsafe.Sizeof(rows[0]))))
	}
	h.Sum(name[:0])
	h = sha256.New()
	w := keyWriter{h}
	w.str(siteIndexMagic)
	w.str(executableID())
	w.str(fmt.Sprint(len(rows), unsafe.Sizeof(gemmPoint{})))
	w.str(string(name[:]))
	h.Sum(key[:0])
	return key, name
}

// siteIndexFile is the file of the index of the input named name in dir.
func siteIndexFile(dir string, name [32]byte) string {
	return filepath.Join(dir, fmt.Sprintf("gemm-%x.idx", name[:12]))
}

// cachedSiteIndex returns the site index of rows, read from dir when a sound
// file of its key is there, else built and written (best effort) there.
func cachedSiteIndex(dir string, rows []gemmPoint) *siteIndex {
	key, name := siteIndexKey(rows)
	file := siteIndexFile(dir, name)
	if idx, ok := readSiteIndex(file, key); ok {
		return idx
	}
	idx := buildSiteIndex(rows)
	_ = writeAtomic(file, encodeSiteIndex(idx, key)) // a cache: answers do not depend on it
	return idx
}

// encodeSiteIndex returns the file bytes of idx under key: magic, key,
// payload length and CRC-32C, then the payload (k_tail, nn, gate, and each
// site's n, k, log2 n, log2 k and m-curve as float64 bits).
func encodeSiteIndex(idx *siteIndex, key [32]byte) []byte {
	out := make([]byte, snapshotHeaderFor(siteIndexMagic))
	copy(out, siteIndexMagic)
	copy(out[len(siteIndexMagic):], key[:])
	f := func(v float64) { out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v)) }
	out = binary.AppendUvarint(out, uint64(idx.kTail))
	out = binary.AppendUvarint(out, uint64(idx.nn))
	f(idx.gate)
	out = binary.AppendUvarint(out, uint64(len(idx.sites)))
	for _, st := range idx.sites {
		f(st.n)
		f(st.k)
		f(st.ln)
		f(st.lk)
		out = binary.AppendUvarint(out, uint64(len(st.curve)))
		for _, p := range st.curve {
			f(p.m)
			f(p.l.lat)
			f(p.l.power)
			f(p.l.energy)
		}
	}
	sealFrame(out, siteIndexMagic)
	return out
}

// readSiteIndex returns the index in file when it is a sound file of key.
func readSiteIndex(file string, key [32]byte) (*siteIndex, bool) {
	b, unmap, err := mapSnapshot(file)
	if err != nil {
		return nil, false
	}
	defer unmap()
	payload, ok := openFrame(b, siteIndexMagic, key)
	if !ok {
		return nil, false
	}
	idx, err := decodeSiteIndex(payload)
	return idx, err == nil
}

// decodeSiteIndex decodes a payload written by encodeSiteIndex.
func decodeSiteIndex(payload []byte) (*siteIndex, error) {
	r := &snapReader{b: payload}
	f := func() float64 {
		b := r.next(8)
		if b == nil {
			return 0
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	idx := &siteIndex{kTail: int(r.uvarint()), nn: int(r.uvarint()), gate: f()}
	n := r.count()
	if n > 0 { // no rows build a nil site list
		idx.sites = make([]site, 0, n)
	}
	idx.byKey = make(map[[2]int]int, n)
	for i := 0; i < n && r.err == nil; i++ {
		st := site{n: f(), k: f(), ln: f(), lk: f()}
		c := r.count()
		if r.err != nil || c == 0 || c > len(r.b)/32 {
			r.fail()
			break
		}
		st.curve = make([]siteCurvePoint, c)
		for j := range st.curve {
			st.curve[j] = siteCurvePoint{m: f(), l: leaf{lat: f(), power: f(), energy: f()}}
		}
		sk := [2]int{int(st.n), int(st.k)}
		if _, dup := idx.byKey[sk]; dup {
			r.fail()
			break
		}
		idx.byKey[sk] = i
		idx.sites = append(idx.sites, st)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return nil, r.err
	}
	return idx, nil
}
