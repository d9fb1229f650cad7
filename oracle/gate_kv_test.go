package oracle_test

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/oracle/gate"
	"github.com/aicdb/aicdb/queueing"
)

// TestGateKV is the KV-pressure part of the validation gate: the model's
// preemption/retraction calendars against the DES with the same KV pool.
func TestGateKV(t *testing.T) {
	checkGate(t, gate.KVFamilies())
}

// TestGateKVFamiliesArePressured: every KV family really runs short (the pool
// fills), so the gate compares the preemption/retraction paths, not an idle pool.
func TestGateKVFamiliesArePressured(t *testing.T) {
	for _, f := range gate.KVFamilies() {
		rep, err := queueing.Quantitative(context.Background(), f.Spec, f.Engine, f.Timing)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		t.Logf("%s: kv_util_peak %.4f preemptions_per_request %.4f", f.Name, rep.KVUtilPeak, rep.PreemptionsPerRequest)
		if !(rep.KVUtilPeak > 0.9) {
			t.Errorf("%s: kv_util_peak %v: the pool never fills", f.Name, rep.KVUtilPeak)
		}
	}
}
