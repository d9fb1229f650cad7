package disagg

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// A trace replay measures every request, in trace order, with causal records; a
// session's later turn arrives after its previous turn's completion + think + RTT.
func TestQuantitativeTraceRecords(t *testing.T) {
	c := testConfig(t, 2, 1)
	reqs := []queueing.TraceRequest{
		{ArrivalMs: 0, ISL: 512, OSL: 8, Session: 1},
		{ArrivalMs: 5, ISL: 256, OSL: 1},
		{ArrivalMs: 10, ISL: 900, OSL: 4, Session: 1, ThinkMs: 100},
	}
	rep, err := QuantitativeTrace(context.Background(), reqs, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fidelity != workload.W3 || len(rep.Records) != 3 {
		t.Fatalf("fidelity %v, %d records; want W3, 3", rep.Fidelity, len(rep.Records))
	}
	for k, r := range rep.Records {
		if r.Generation != k || r.ArrivalMs != reqs[k].ArrivalMs || r.TTFTMs <= 0 || r.E2EMs < r.TTFTMs {
			t.Errorf("record %d: %+v", k, r)
		}
	}
	if r := rep.Records[1]; r.DecodeWorker != -1 || r.KVTransferMs != 0 {
		t.Errorf("osl 1: decode worker %d, transfer %v; want no handoff", r.DecodeWorker, r.KVTransferMs)
	}
	ses, err := QuantitativeSessions(context.Background(), reqs, c, Options{}, SessionOptions{ClientRTTMs: 7})
	if err != nil {
		t.Fatal(err)
	}
	prev, later := ses.Records[0], ses.Records[2]
	if want := prev.ArrivalMs + prev.E2EMs + 100 + 7; later.ArrivalMs != want || ses.Fidelity != workload.W4 {
		t.Errorf("later turn arrives at %v (fidelity %v); want %v (W4)", later.ArrivalMs, ses.Fidelity, want)
	}
}

func TestQuantitativeTraceBadInput(t *testing.T) {
	c := testConfig(t, 1, 1)
	for _, tc := range []struct {
		reqs []queueing.TraceRequest
		want string
	}{
		{nil, "trace: no requests"},
		{[]queueing.TraceRequest{{ArrivalMs: 5, ISL: 8, OSL: 2}, {ArrivalMs: 1, ISL: 8, OSL: 2}}, "trace request 1: arrival 1 ms: arrivals must be finite, ≥ 0 and non-decreasing"},
		{[]queueing.TraceRequest{{ISL: 8, OSL: 2, Prefix: 4}}, "trace request 0: prefix = 4: prefix caching is not modelled in disaggregated runs; replay with prefix 0"},
		{[]queueing.TraceRequest{{ISL: 0, OSL: 2}}, "trace request 0: isl = 0, osl = 2: both must be ≥ 1"},
	} {
		_, err := QuantitativeTrace(context.Background(), tc.reqs, c, Options{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("err = %v; want %q", err, tc.want)
		}
	}
}
