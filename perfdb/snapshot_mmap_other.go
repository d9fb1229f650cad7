//go:build !unix

package perfdb

import "os"

// mapSnapshot reads file (no mapping on this platform); see the unix version.
func mapSnapshot(file string) ([]byte, func(), error) {
	b, err := os.ReadFile(file)
	return b, func() {}, err
}
