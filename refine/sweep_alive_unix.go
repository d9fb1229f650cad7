//go:build unix

package refine

import (
	"errors"
	"syscall"
)

// ProcessAlive reports whether process pid of this host exists (signal 0: nil or
// EPERM, a process of another user, mean it does).
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
