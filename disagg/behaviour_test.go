package disagg

import (
	"context"
	"errors"
	"fmt"
	"github.com/aicdb/aicdb/engine"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestFabricFanInHalves: two flows from two prefill NICs into one decode NIC get
// half its bandwidth each (max-min fair); fan-out from one prefill NIC likewise;
// a flow alone gets the whole link.
func TestFabricFanInHalves(t *testing.T) {
	f := fabric{caps: []float64{8, 8, 8, 8}} // P0, P1 egress; D0, D1 ingress
	f.add(0, 0, [2]int{0, 2}, 80)
	if got := f.rateOf(0); got != 8 {
		t.Fatalf("alone: rate %v, want 8", got)
	}
	f.add(0, 1, [2]int{1, 2}, 80) // fan-in on D0
	if a, b := f.rateOf(0), f.rateOf(1); a != 4 || b != 4 {
		t.Fatalf("fan-in: rates %v, %v, want 4, 4", a, b)
	}
	if got := f.next(); got != 20 {
		t.Fatalf("fan-in: both finish at %v, want 20", got)
	}
	f.add(10, 2, [2]int{0, 3}, 80) // fan-out from P0: P0 is now shared by 0 and 2
	if a, b, c := f.rateOf(0), f.rateOf(1), f.rateOf(2); a != 4 || b != 4 || c != 4 {
		t.Fatalf("fan-out: rates %v, %v, %v, want 4, 4, 4", a, b, c)
	}
	done := f.pop(f.next(), nil)
	if len(done) != 2 || done[0] != 0 || done[1] != 1 || f.now != 20 {
		t.Fatalf("pop at %v: %v, want flows 0 and 1 at 20", f.now, done)
	}
	if got := f.rateOf(2); got != 8 {
		t.Fatalf("after: rate %v, want 8", got)
	}
	if got := f.next(); got != 25 { // 40 bytes left at 20, alone at 8
		t.Fatalf("last flow ends at %v, want 25", got)
	}
}

// TestFanInTandem: 2P1D at C = 2 — both prompts complete together and their KV
// fans into the one decode NIC: each transfer takes twice the 1P1D transfer.
func TestFanInTandem(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 10, Concurrency: 2}
	one := eval(t, workload.Spec{ISL: 1000, OSL: 10, Concurrency: 1}, testConfig(t, 1, 1))
	two := eval(t, w, testConfig(t, 2, 1))
	if !near(one.KVTransfer.Mean(), 12.5) || !near(two.KVTransfer.Max(), 25) {
		t.Fatalf("transfer 1P1D %v ms, 2P1D max %v ms; want 12.5 and 25 (half the bandwidth each)", one.KVTransfer.Mean(), two.KVTransfer.Max())
	}
	// 2P2D: separate decode NICs, no sharing.
	if r := eval(t, w, testConfig(t, 2, 2)); !near(r.KVTransfer.Max(), 12.5) {
		t.Fatalf("2P2D transfer max %v, want 12.5", r.KVTransfer.Max())
	}
}

// TestKappaOneSerialisesPrefill: with κ = 1 a prefill worker holds one request
// from admission until the decode side has pulled it, so one worker completes at
// most one request per prefill pass + transfer: X ≤ 1/(15 + 12.5 ms), and with
// decode far from saturation it reaches that bound.
func TestKappaOneSerialisesPrefill(t *testing.T) {
	c := testConfig(t, 1, 1)
	c.Prefill.InFlightCap = 1
	r := eval(t, workload.Spec{ISL: 1000, OSL: 4, Concurrency: 16}, c)
	bound := 1000 / (15 + 12.5)
	if r.ThroughputRPS > bound*(1+1e-9) || r.ThroughputRPS < 0.99*bound {
		t.Fatalf("κ=1: X = %v rps, want the serial bound %v", r.ThroughputRPS, bound)
	}
	c.Prefill.InFlightCap = 0
	if r2 := eval(t, workload.Spec{ISL: 1000, OSL: 4, Concurrency: 16}, c); !(r2.ThroughputRPS > 1.5*bound) {
		t.Fatalf("no κ: X = %v rps, want well above the serial bound %v", r2.ThroughputRPS, bound)
	}
}

// TestHeadroomZeroSerialisesTransfers: a decode KV that holds exactly one request
// admits one transfer at a time (no fan-in sharing, transfers never overlap), and
// the prefill worker holds the next prompt until then.
func TestHeadroomZeroSerialisesTransfers(t *testing.T) {
	c := testConfig(t, 2, 1)
	c.Decode.KVCapacityTokens = 1000 + 10
	r := eval(t, workload.Spec{ISL: 1000, OSL: 10, Concurrency: 2}, c)
	if !near(r.KVTransfer.Max(), 12.5) || !near(r.KVTransfer.Min(), 12.5) {
		t.Fatalf("transfers %v..%v ms, want 12.5 each (serialised)", r.KVTransfer.Min(), r.KVTransfer.Max())
	}
	if r.DHeadroomMin != 0 {
		t.Fatalf("headroom min %v, want 0", r.DHeadroomMin)
	}
	// One request in decode at a time: X ≤ 1/(transfer + the V-D5 one-token pass +
	// 8 decode passes).
	if bound := 1000 / (12.5 + 3.0 + 8*3.1); r.ThroughputRPS > bound*(1+1e-9) {
		t.Fatalf("X = %v, above the serial decode bound %v", r.ThroughputRPS, bound)
	}
}

// nonMonotone is the prefill-hold coupling family: 2P1D, prefill passes dominated
// by a fixed cost (batching prompts is nearly free), a 4 GB/s fabric and a decode
// KV of 8 requests.
func nonMonotone(t *testing.T, kappa, kvRequests int) Config {
	c := testConfig(t, 2, 1)
	c.Prefill.Timing = timing.Linear{BaseMs: 40, PrefillMsPerToken: 0.005}
	c.Prefill.InFlightCap = kappa
	c.Decode.KVCapacityTokens = kvRequests * (1000 + 64)
	c.Fabric.InterNodeGBps = 4
	return c
}

// TestNonMonotonePrefillConcurrency: raising the prefill in-flight cap κ raises
// throughput while the decode KV has headroom, then lowers it once the headroom is
// gone (cohorts of κ prompts completing in one prefill pass fan into the decode
// NIC together and keep their reserved KV idle κ times longer); with unbounded
// decode KV the same sweep keeps rising.
func TestNonMonotonePrefillConcurrency(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 64, Concurrency: 32}
	x := map[int]float64{}
	t.Log("| κ | X (rps), decode KV 8 requests | burst start | staggered start | X (rps), unbounded decode KV | kv_transfer_ms_mean | d_headroom_min |")
	for _, k := range []int{1, 2, 3, 4, 8, 16} {
		r := eval(t, w, nonMonotone(t, k, 8))
		u := eval(t, w, nonMonotone(t, k, 0))
		x[k] = r.ThroughputRPS
		t.Logf("| %d | %.2f | %.2f | %.2f | %.2f | %.1f | %.3f |", k, r.ThroughputRPS, r.BurstThroughputRPS, r.StaggeredThroughputRPS, u.ThroughputRPS, r.KVTransfer.Mean(), r.DHeadroomMin)
	}
	if !(x[2] > x[1] && x[4] < x[2] && x[8] < x[2]) {
		t.Fatalf("throughput vs κ %v: want a rise from κ=1 to 2 and a fall beyond", x)
	}
	u1 := eval(t, w, nonMonotone(t, 1, 0)).ThroughputRPS
	u8 := eval(t, w, nonMonotone(t, 8, 0)).ThroughputRPS
	if !(u8 > u1) {
		t.Fatalf("unbounded decode KV: X(κ=8) = %v ≤ X(κ=1) = %v, want higher", u8, u1)
	}
}

// TestScreeningAgainstTandem: the screening lower bound never exceeds the
// quantitative minimum steady TTFT, and its throughput is within 30 % of the
// quantitative one on the behaviour families.
func TestScreeningAgainstTandem(t *testing.T) {
	for i, tc := range []struct {
		w workload.Spec
		c Config
	}{
		{workload.Spec{ISL: 1000, OSL: 10, Concurrency: 1}, testConfig(t, 1, 1)},
		{workload.Spec{ISL: 1000, OSL: 64, Concurrency: 32}, testConfig(t, 2, 1)},
		{workload.Spec{ISL: 1000, OSL: 64, Concurrency: 32}, nonMonotone(t, 2, 8)},
		{workload.Spec{ISL: 1000, OSL: 64, Concurrency: 64}, testConfig(t, 2, 2)},
		{workload.Spec{ISL: 1000, OSL: 64, RateRPS: 5}, testConfig(t, 1, 1)},
	} {
		q := eval(t, tc.w, tc.c)
		s, err := Screening(tc.w, tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if s.TTFTSteadyP99Lo > q.TTFTSteady.Min()*(1+1e-9) {
			t.Errorf("case %d: screening lo %v above the tandem's minimum TTFT %v", i, s.TTFTSteadyP99Lo, q.TTFTSteady.Min())
		}
		t.Logf("case %d: multi-stable %v alt X %.3f; X screening %.3f quantitative %.3f; TTFT p99 %.1f vs %.1f; ITL p50 %.2f vs %.2f", i, q.MultiStable, q.StaggeredThroughputRPS, s.ThroughputRPS, q.ThroughputRPS,
			s.TTFTSteady.Quantile(.99), q.TTFTSteady.Quantile(.99), s.ITL.Quantile(.5), q.ITL.Quantile(.5))
		if r := s.ThroughputRPS / q.ThroughputRPS; r < 0.7 || r > 1.3 {
			t.Errorf("case %d: screening X %v vs quantitative %v", i, s.ThroughputRPS, q.ThroughputRPS)
		}
	}
}

// TestPushFreesPrefillSlot: with a push connector the prefill worker frees its
// slot when it sends, so κ = 1 serialises only the prefill pass, not the handoff
// (X = 1/15 ms instead of 1/27.5 ms), and no decode reservation gates the send.
func TestPushFreesPrefillSlot(t *testing.T) {
	c := testConfig(t, 1, 1)
	c.Prefill.InFlightCap = 1
	c.Push = true
	r := eval(t, workload.Spec{ISL: 1000, OSL: 4, Concurrency: 16}, c)
	if bound := 1000.0 / 15; r.ThroughputRPS > bound*(1+1e-9) || r.ThroughputRPS < 0.99*bound {
		t.Fatalf("push κ=1: X = %v, want the prefill-pass bound %v", r.ThroughputRPS, bound)
	}
}

// TestPlacementNVLink: workers wholly on one node hand off over NVLink, others over
// the NICs (prefill workers are placed first, then decode, packed in order).
func TestPlacementNVLink(t *testing.T) {
	c := testConfig(t, 2, 2)
	c.Prefill.GPUsPerWorker, c.Decode.GPUsPerWorker = 2, 4
	c.Fabric.GPUsPerNode, c.Fabric.IntraNodeGBps = 8, 400
	// GPUs: P0 0-1, P1 2-3, D0 4-7 (node 0), D1 8-11 (node 1).
	if got := c.route(0, 0); got != [2]int{4, 6} {
		t.Errorf("P0→D0 links %v, want the NVLink ports [4 6]", got)
	}
	if got := c.route(1, 1); got != [2]int{1, 3} {
		t.Errorf("P1→D1 links %v, want the NICs [1 3]", got)
	}
	caps := c.linkCaps()
	if caps[1] != 8e6 || caps[4] != 320e6 {
		t.Errorf("link caps %v, want NIC 10 GB/s × 0.8 = 8e6 B/ms and NVLink 400 × 0.8 = 320e6 B/ms", caps)
	}
}

// TestDeterministic: the same inputs give bit-identical columns.
func TestDeterministic(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 64, Concurrency: 32}
	a := eval(t, w, nonMonotone(t, 4, 8)).Columns(3)
	b := eval(t, w, nonMonotone(t, 4, 8)).Columns(3)
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %v then %v", k, v, b[k])
		}
	}
}

// TestPrefillHoldsChecked: an SGLang prefill pool is checked, not modelled.
// Prompts whose KV is on its way to a decode worker stay held on their prefill
// worker until the send completes (S-D3; 2P1D over 4 GB/s, C 128: the report's
// peak, a few prompts, as S-D2's preallocation gates the prefills); a prefill
// pool below that peak stops the run with a
// PrefillHoldsError naming the need and the pool, while a pool at the peak, or
// an in-flight cap κ at the prompts the pool holds, leaves the run as it was;
// the screening tier ignores the pool.
func TestPrefillHoldsChecked(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 64, Concurrency: 128}
	sgl := func() Config {
		c := nonMonotone(t, 0, 8)
		e, err := engine.Defaults(engine.SGLang, "")
		if err != nil {
			t.Fatal(err)
		}
		c.Prefill.Engine, c.Decode.Engine = e, e
		return c
	}
	c := sgl()
	free := eval(t, w, c)
	peak := free.PrefillAdmitPeakTokens
	if peak < 2*1000 {
		t.Fatalf("peak %d tokens: want the holds of more than one prompt (the family's point)", peak)
	}
	c.Prefill.KVCapacityTokens = peak
	if r := eval(t, w, c); !reflect.DeepEqual(r, free) {
		t.Errorf("a prefill pool at the peak (%d) changed the report", peak)
	}
	c.Prefill.KVCapacityTokens = peak / 2
	_, err := Quantitative(context.Background(), w, c, Options{})
	var held *PrefillHoldsError
	if !errors.As(err, &held) || held.PoolTokens != peak/2 || held.NeedTokens <= peak/2 || held.NeedTokens > peak {
		t.Fatalf("pool %d: %v, want a PrefillHoldsError above the pool, at most the peak %d", peak/2, err, peak)
	}
	want := fmt.Sprintf("a prefill worker took a prompt while holding the KV of prompts waiting for their decode worker, %d tokens in all, above its pool of %d: the prefill engine would have stalled, which the tandem does not model", held.NeedTokens, peak/2)
	if err.Error() != want {
		t.Errorf("error %q\nwant %q", err, want)
	}
	bs := c.Prefill.Engine.BlockSize
	c.Prefill.InFlightCap = held.PromptsHeld(w.ISL, bs)
	r, err := Quantitative(context.Background(), w, c, Options{})
	if err != nil {
		t.Fatalf("κ %d: %v: want a run within the pool %d", c.Prefill.InFlightCap, err, peak/2)
	}
	if r.PrefillAdmitPeakTokens > peak/2 {
		t.Fatalf("κ %d: peak %d, above the pool %d", c.Prefill.InFlightCap, r.PrefillAdmitPeakTokens, peak/2)
	}
	s0, err := Screening(w, sgl())
	if err != nil {
		t.Fatal(err)
	}
	c.Prefill.InFlightCap = 0
	if s1, err := Screening(w, c); err != nil || !reflect.DeepEqual(s0, s1) {
		t.Errorf("screening with a prefill pool: %v, or a changed report", err)
	}
}

// TestPrefillPoolModelled: a vLLM prefill worker of a pull connector keeps a
// finished prompt's blocks until its pull (V-P3), and its kernel models the
// pool: the configuration of TestPrefillHoldsChecked with a pool at the free
// run's peak gives the same report; at half of it the run goes on (no error),
// no admission needs more than the pool, and the prompts wait on the prefill
// worker — TTFT mean up — where they used to pile up past its memory. With every
// prompt the same length, a pool of n whole prompts is κ = n (each running or
// held prompt takes the same blocks). The oracle gate's "prefill-pool" families
// check the rule against the DES.
func TestPrefillPoolModelled(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 64, Concurrency: 128}
	c := nonMonotone(t, 0, 8)
	free := eval(t, w, c)
	peak := free.PrefillAdmitPeakTokens
	c.Prefill.KVCapacityTokens = peak
	if r := eval(t, w, c); !reflect.DeepEqual(r, free) {
		t.Errorf("a prefill pool at the peak (%d) changed the report", peak)
	}
	bs := c.Prefill.Engine.BlockSize
	perPrompt := (w.ISL + bs - 1) / bs * bs
	c.Prefill.KVCapacityTokens = peak / 2 / perPrompt * perPrompt
	r := eval(t, w, c)
	if r.PrefillAdmitPeakTokens > c.Prefill.KVCapacityTokens || !(r.TTFTSteady.Mean() > free.TTFTSteady.Mean()) {
		t.Errorf("pool %d: admit peak %d, TTFT mean %v (free run %v): want the peak within the pool and the prompts waiting",
			c.Prefill.KVCapacityTokens, r.PrefillAdmitPeakTokens, r.TTFTSteady.Mean(), free.TTFTSteady.Mean())
	}
	k := nonMonotone(t, c.Prefill.KVCapacityTokens/perPrompt, 8)
	if rk := eval(t, w, k); !near(rk.TTFTSteady.Mean(), r.TTFTSteady.Mean()) || !near(rk.ThroughputRPS, r.ThroughputRPS) {
		t.Errorf("a pool of %d prompts: TTFT %v, X %v; κ = %d: TTFT %v, X %v", c.Prefill.KVCapacityTokens/perPrompt,
			r.TTFTSteady.Mean(), r.ThroughputRPS, k.Prefill.InFlightCap, rk.TTFTSteady.Mean(), rk.ThroughputRPS)
	}
}
