package gate_test

import (
	"os"

	"github.com/aicdb/aicdb/queueing"
)

// siliconOptions are the evaluator options of TestSiliconClosingTable.
func siliconOptions() queueing.Options {
	if os.Getenv("AICDB_SILICON_OPTIONS") == "burst" {
		return queueing.Options{}
	}
	return queueing.DefaultOptions()
}
