//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// makeReadOnly makes path (a file or a directory) unwritable for this process until
// the test ends: chmod for an ordinary user; the immutable attribute (FS_IOC_SETFLAGS)
// for root, which file modes do not stop. It skips the test where neither works.
func makeReadOnly(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		mode := os.FileMode(0o444)
		if fi.IsDir() {
			mode = 0o555
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(path, fi.Mode().Perm()) })
		return
	}
	const (
		getFlags  = 0x80086601 // FS_IOC_GETFLAGS
		setFlags  = 0x40086602 // FS_IOC_SETFLAGS
		immutable = 0x10       // FS_IMMUTABLE_FL
	)
	ioctl := func(req uintptr, flags *int32) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(unsafe.Pointer(flags))); e != 0 {
			return e
		}
		return nil
	}
	var flags int32
	if err := ioctl(getFlags, &flags); err != nil {
		t.Skipf("cannot make %s read-only as root: %v", path, err)
	}
	set := flags | immutable
	if err := ioctl(setFlags, &set); err != nil {
		t.Skipf("cannot make %s read-only as root: %v", path, err)
	}
	t.Cleanup(func() {
		clear := flags &^ immutable
		if err := ioctl(setFlags, &clear); err != nil {
			t.Errorf("clear the immutable attribute of %s: %v", path, err)
		}
	})
	if f, err := os.OpenFile(filepath.Join(path, "probe"), os.O_CREATE|os.O_WRONLY, 0o644); err == nil && fi.IsDir() {
		f.Close()
		t.Skipf("the immutable attribute does not protect %s here", path)
	}
}

// TestQueryReadOnlyStore (issue 8 item 6): a store the process may not write
// answers queries; refinement is skipped with one stderr line.
func TestQueryReadOnlyStore(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatal(errs)
	}
	for _, ro := range []struct {
		name string
		path string
	}{{"file", db}, {"directory", filepath.Dir(db)}} {
		t.Run(ro.name, func(t *testing.T) {
			storeDigest(t, db) // checkpoint: no -wal or -shm left for the read-only open to use
			makeReadOnly(t, ro.path)
			code, out, errs := cliRun(t, db, "query", "--format", "csv", "select count(*) from pareto where ttft_steady_p99 < 200")
			if code != 0 || !strings.HasPrefix(out, "count(*)\n") {
				t.Fatalf("query on a read-only store: code %d out %q err %q", code, out, errs)
			}
			if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "refinement skipped") || !strings.Contains(errs, "read-only") {
				t.Fatalf("stderr %q: want one line saying refinement was skipped (read-only)", errs)
			}
			code, out, errs = cliRun(t, db, "best", "--ttft", "200", "--ttft-percentile", "p99", "--itl", "30", "--format", "json")
			if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "[") || !strings.Contains(errs, "refinement skipped: store") {
				t.Fatalf("best on a read-only store: code %d out %q err %q", code, out, errs)
			}
			code, out, errs = cliRun(t, db, "query", "--format", "csv", "select count(*) from operating_points")
			if code != 0 || out != "count(*)\n352\n" || errs != "" {
				t.Fatalf("plain query on a read-only store: code %d out %q err %q", code, out, errs)
			}
		})
	}
}
