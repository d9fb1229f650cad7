//go:build !unix

package refine

// ProcessAlive cannot tell on this platform and reports true: a lease holder then
// counts as gone only once its heartbeat is older than the lease timeout.
func ProcessAlive(pid int) bool { return pid > 0 }
