package perfdb

// snapshot.go keeps the decoded perf data of LoadStore in a binary snapshot
// beside the store, so a process that prices one point does not decode the
// stored Parquet again (decoding and first-wins resolution are ~90 % of a
// single `aicdb eval --model` otherwise).
//
// Where: a folder <store>.perfcache/ next to the SQLite file, one file per
// (system, backend, version, shared layer, table selection). Not inside the
// store: eval and estimate open the store read-only, sweeps hold its write
// lock, a snapshot table would need a migration, and ~10 MB blobs per
// configuration would bloat the store and its WAL. The folder is a pure
// cache: deleting it loses nothing.
//
// Validity: a snapshot is used only when its key matches, and the key hashes
// everything the loaded Data depends on — the content hashes (sha256) of every
// perf file the store holds for the system, the system spec, the imported
// directory index (collection_meta, reuse.yaml, INCOMPLETE markers, the reuse
// manifest), the backend, version, shared layer and table selection, the
// layout of the Data type, and the identity of the running executable (its
// path, size and modification time: a rebuilt binary, whose loader rules may
// differ, rebuilds its snapshots). The payload carries a CRC-32C; a file that
// is truncated, corrupt, of another key or another format is ignored and
// rebuilt. Snapshots are written to a temporary file and renamed into place,
// so concurrent processes see either the old or the new file.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// snapshotMagic starts every snapshot file; bump the version when the file
// layout (not the Data layout, which is keyed) changes.
const snapshotMagic = "aicdb perfdb snapshot 1\n"

// snapshotHeader is magic, key (32 bytes), payload length (uint64 LE) and the
// payload's CRC-32C (uint32 LE).
const snapshotHeader = len(snapshotMagic) + sha256.Size + 8 + 4

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// executableID identifies the running binary (path, size, modification
// time); "" when it cannot be read, which turns snapshots off.
var executableID = sync.OnceValue(func() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(p)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s|%d|%d", p, fi.Size(), fi.ModTime().UnixNano())
})

// snapshotDir is the snapshot folder of the store at storePath.
func snapshotDir(storePath string) string { return storePath + ".perfcache" }

// snapshotFile is the file one load's snapshot lives in: readable, and one
// per configuration, so a rebuilt snapshot replaces the stale one.
func snapshotFile(dir, system, backend, version string, plan loadPlan) string {
	layer := "shared"
	if !plan.shared {
		layer = "own"
	}
	tag := plan.tableTag()
	if tag != "all" {
		sum := sha256.Sum256([]byte(tag))
		tag = fmt.Sprintf("t%x", sum[:4])
	}
	name := strings.Join([]string{safeName(system), safeName(backend), safeName(version), layer, tag}, "_")
	return filepath.Join(dir, name+".snap")
}

// safeName keeps [A-Za-z0-9.-] and replaces anything else with '-'.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, s)
}

// keyWriter writes length-prefixed fields into a hash, so field boundaries
// cannot be confused.
type keyWriter struct{ h hash.Hash }

func (w keyWriter) str(s string) {
	var n [binary.MaxVarintLen64]byte
	w.h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	w.h.Write([]byte(s))
}

func (w keyWriter) opt(s *string) {
	if s == nil {
		w.str("\x00absent")
		return
	}
	w.str("\x01" + *s)
}

// snapshotKey hashes every input of assemble over the store source src for
// (backend, version, plan), plus the Data layout and the executable.
func snapshotKey(tr *tree, src *storeSource, backend, version string, plan loadPlan) ([32]byte, error) {
	h := sha256.New()
	w := keyWriter{h}
	w.str(snapshotMagic)
	w.str(executableID())
	w.str(dataLayout())
	sys, err := json.Marshal(tr.system)
	if err != nil {
		return [32]byte{}, fmt.Errorf("snapshot key: system spec: %w", err)
	}
	w.str(string(sys))
	w.str(backend)
	w.str(version)
	w.str(fmt.Sprint(plan.shared))
	w.str(plan.tableTag())
	keys := make([]dirKey, 0, len(tr.dirs))
	for k := range tr.dirs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.family != b.family {
			return a.family < b.family
		}
		if a.backend != b.backend {
			return a.backend < b.backend
		}
		return a.version < b.version
	})
	w.str(fmt.Sprint(len(keys)))
	for _, k := range keys {
		d := tr.dirs[k]
		w.str(k.family)
		w.str(k.backend)
		w.str(k.version)
		w.opt(d.meta)
		w.opt(d.reuseText)
		w.str(fmt.Sprint(d.incomplete, len(d.reuse)))
		for _, r := range d.reuse {
			w.str(r.Table)
			w.str(r.FromVersion)
			w.str(r.Reason)
			w.str(r.ApprovedBy)
		}
	}
	w.str(fmt.Sprint(len(tr.manifest)))
	for _, m := range tr.manifest {
		w.str(m.OpFile)
		w.str(m.KernelSource)
		w.str(m.Tier)
		w.str(strings.Join(m.Frameworks, "\x00"))
	}
	paths := make([]string, 0, len(src.files))
	for p := range src.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	w.str(fmt.Sprint(len(paths)))
	for _, p := range paths {
		w.str(p)
		w.str(src.files[p].sha256)
	}
	var key [32]byte
	h.Sum(key[:0])
	return key, nil
}

// readSnapshot returns the Data in file when the file is a sound snapshot of
// key; ok is false otherwise (missing, another key, truncated, corrupt).
func readSnapshot(file string, key [32]byte) (d *Data, ok bool) {
	return readSnapshotOnly(file, key, loadPlan{})
}

// readSnapshotOnly is readSnapshot of the tables plan wants (Data.only), the
// others passed over undecoded.
func readSnapshotOnly(file string, key [32]byte, plan loadPlan) (d *Data, ok bool) {
	b, unmap, err := mapSnapshot(file)
	if err != nil {
		return nil, false
	}
	defer unmap()
	payload, ok := openFrame(b, snapshotMagic, key)
	if !ok {
		return nil, false
	}
	d, err = decodeDataSkipping(payload, unwantedFields(plan))
	if err != nil {
		return nil, false
	}
	return d.only(plan), true
}

// encodeSnapshot returns the bytes of a snapshot of d under key.
func encodeSnapshot(d *Data, key [32]byte) ([]byte, error) {
	out := make([]byte, snapshotHeader, snapshotHeader+16<<20)
	copy(out, snapshotMagic)
	copy(out[len(snapshotMagic):], key[:])
	out, err := encodeData(out, d)
	if err != nil {
		return nil, err
	}
	sealFrame(out, snapshotMagic)
	return out, nil
}

// snapshotHeaderFor is the header length of a cache file with magic: magic,
// key, payload length (uint64 LE), payload CRC-32C (uint32 LE).
func snapshotHeaderFor(magic string) int { return len(magic) + sha256.Size + 8 + 4 }

// sealFrame writes the payload length and CRC-32C into the header of out, a
// cache file of magic whose magic, key and payload are in place.
func sealFrame(out []byte, magic string) {
	payload := out[snapshotHeaderFor(magic):]
	h := out[len(magic)+sha256.Size:]
	binary.LittleEndian.PutUint64(h, uint64(len(payload)))
	binary.LittleEndian.PutUint32(h[8:], crc32.Checksum(payload, crc32c))
}

// openFrame returns the payload of b when b is a sound cache file of magic
// and key (header intact, payload length and CRC-32C matching).
func openFrame(b []byte, magic string, key [32]byte) ([]byte, bool) {
	hl := snapshotHeaderFor(magic)
	if len(b) < hl || string(b[:len(magic)]) != magic {
		return nil, false
	}
	h := b[len(magic):]
	if !bytes.Equal(h[:sha256.Size], key[:]) {
		return nil, false
	}
	payload := b[hl:]
	if binary.LittleEndian.Uint64(h[sha256.Size:]) != uint64(len(payload)) || crc32.Checksum(payload, crc32c) != binary.LittleEndian.Uint32(h[sha256.Size+8:]) {
		return nil, false
	}
	return payload, true
}

// writeSnapshot stores a snapshot of d under key in file, atomically
// (temporary file, then rename).
func writeSnapshot(file string, key [32]byte, d *Data) error {
	b, err := encodeSnapshot(d, key)
	if err != nil {
		return err
	}
	return writeAtomic(file, b)
}

// writeAtomic writes b to file through a temporary file renamed into place,
// so concurrent readers see either the old or the new file.
func writeAtomic(file string, b []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("snapshot folder %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(file)+".tmp*")
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", file, err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Chmod(0o644)
	}
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, file)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("snapshot %s: %w", file, werr)
	}
	return nil
}

// cacheableStore reports whether files derived from the store at storePath
// may be cached beside it: a plain file (not in-memory, not a URI) and a
// known executable.
func cacheableStore(storePath string) bool {
	if executableID() == "" || storePath == "" || strings.HasPrefix(storePath, "file:") || strings.Contains(storePath, ":memory:") {
		return false
	}
	fi, err := os.Stat(storePath)
	return err == nil && fi.Mode().IsRegular()
}

// snapshotTarget returns the snapshot file and key of one LoadStore call, or
// ok false when snapshots are off for it: disabled by WithoutSnapshot, a store
// that is not a plain file (in-memory or URI), an unknown executable, or a
// (backend, version) the store does not have (assemble reports that error).
func snapshotTarget(storePath string, tr *tree, src *storeSource, backend, version string, plan loadPlan) (file string, key [32]byte, ok bool) {
	if !plan.snapshot || !cacheableStore(storePath) {
		return "", key, false
	}
	if backend == "" || version == "" || !tr.hasBackendVersion(backend, version) {
		return "", key, false
	}
	key, err := snapshotKey(tr, src, backend, version, plan)
	if err != nil {
		return "", key, false
	}
	return snapshotFile(snapshotDir(storePath), tr.system.Name, backend, version, plan), key, true
}
