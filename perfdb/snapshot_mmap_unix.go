//go:build unix

package perfdb

import (
	"os"
	"syscall"
)

// mapSnapshot maps file read-only and returns its bytes and the function
// that unmaps them. Mapping skips the heap copy of a ~10 MB snapshot (its
// allocation, zeroing and the read's copy): a warm process decodes straight
// from the page cache. The decoded Data holds no reference into the mapping
// (strings and rows are copied out), so unmapping after decodeData is safe; snapshots are replaced by rename,
// never rewritten in place, so a mapped file is not truncated under the reader.
func mapSnapshot(file string) ([]byte, func(), error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	n := fi.Size()
	if n <= 0 || int64(int(n)) != n {
		b, err := os.ReadFile(file)
		return b, func() {}, err
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		b, err := os.ReadFile(file)
		return b, func() {}, err
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
