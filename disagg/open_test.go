package disagg

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/queueing/workload"
)

// TestOpenLoop: a stable rate is served (the windowed throughput of one whole W1
// stream period is the rate, within 1 %) and a rate beyond the tandem's capacity is reported
// unstable with its reason, never a number; both tiers agree on the verdict.
func TestOpenLoop(t *testing.T) {
	c := testConfig(t, 1, 1)
	w := workload.Spec{ISL: 1000, OSL: 10, RateRPS: 20}
	r := eval(t, w, c)
	if r.Unstable || r.ThroughputRPS < 19.8 || r.ThroughputRPS > 20.2 {
		t.Fatalf("rate 20: unstable %v, X %v", r.Unstable, r.ThroughputRPS)
	}
	if r.Fidelity != workload.W1 {
		t.Fatalf("fidelity %v, want W1", r.Fidelity)
	}
	// The fabric alone caps the tandem at 1/12.5 ms = 80 rps.
	w.RateRPS = 200
	r = eval(t, w, c)
	if !r.Unstable || !strings.Contains(r.UnstableReason, "unstable at rate 200 rps") {
		t.Fatalf("rate 200: unstable %v (%q)", r.Unstable, r.UnstableReason)
	}
	if cols := r.Columns(1); len(cols) != 2 || cols["unstable"] != true {
		t.Fatalf("unstable columns %v", cols)
	}
	s, err := Screening(w, c)
	if err != nil || !s.Unstable {
		t.Fatalf("screening at 200 rps: %v, unstable %v", err, s != nil && s.Unstable)
	}
}

// TestShapeStrata: W2 shapes flow through the tandem (each request its own isl
// and osl; the decode KV need and the handoff bytes follow the request).
func TestShapeStrata(t *testing.T) {
	c := testConfig(t, 2, 1)
	c.Decode.KVCapacityTokens = 4 * (2000 + 20)
	w := workload.Spec{ISL: 1000, OSL: 10, Concurrency: 8, ISLQuantiles: []int{500, 1000, 2000}, OSLQuantiles: []int{5, 20}}
	r, err := Quantitative(context.Background(), w, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Fidelity != workload.W2 {
		t.Fatalf("fidelity %v, want W2", r.Fidelity)
	}
	// Handoffs alone take 500, 1000 or 2000 tokens × 10⁵ B / 8·10⁶ B/ms; fan-in can
	// only stretch them.
	if lo := r.KVTransfer.Min(); lo < 6.25-1e-9 {
		t.Fatalf("shortest handoff %v ms, below 500 tokens alone (6.25 ms)", lo)
	}
	c.Decode.KVCapacityTokens = 2000 + 19
	if _, err := Quantitative(context.Background(), w, c, Options{}); err == nil || !strings.Contains(err.Error(), "one request of isl 2000 + osl 20 needs 127 for its last step") {
		t.Fatalf("decode KV below the largest request: %v", err)
	}
}
