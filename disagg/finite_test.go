package disagg

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestFiniteBurstSerialised: one round (N = C) of a burst on a prefill worker
// that runs one request at a time. The requests reach the router
// FiniteAdmitGapMs apart and are prefilled one after the other, so request k's
// first token is at (k + 1)·15 ms: TTFT_k = 15(k + 1) − k·gap, the transient is
// the whole run, and throughput is N over the last completion.
func TestFiniteBurstSerialised(t *testing.T) {
	c := testConfig(t, 1, 1)
	c.Prefill.BatchCap = 1
	const C = 4
	r, err := QuantitativeFinite(context.Background(), workload.Spec{ISL: 1000, OSL: 10, Concurrency: C}, c, queueing.FiniteRun{Requests: C}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for k := 0; k < C; k++ {
		want += 15*float64(k+1) - float64(k)*queueing.FiniteAdmitGapMs
	}
	want /= C
	if got := r.TTFTSteady.Mean(); !near(got, want) {
		t.Errorf("TTFT mean %v, want %v (the burst prefilled one by one)", got, want)
	}
	if got := r.TTFTTransient.Mean(); !near(got, want) {
		t.Errorf("transient TTFT mean %v, want the run's %v (N = C)", got, want)
	}
	if got := r.TTFTSteady.Max(); !near(got, 15*C-(C-1)*queueing.FiniteAdmitGapMs) {
		t.Errorf("TTFT max %v, want the last prefill %v", got, 15*C-(C-1)*queueing.FiniteAdmitGapMs)
	}
	if r.Diagnostics.SteadyRequests != C || r.Diagnostics.FiniteRun == nil || r.Diagnostics.FiniteRun.Requests != C {
		t.Errorf("diagnostics %+v: want %d measured requests and the run recorded", r.Diagnostics, C)
	}
	if got := r.ThroughputRPS; !near(got, C/r.Diagnostics.WindowEndMs*1000) || !(got > 0) {
		t.Errorf("throughput %v, want N / last completion = %v", got, C/r.Diagnostics.WindowEndMs*1000)
	}
}

// TestFiniteRoundsAndDeterminism: a run of N requests measures exactly N (each
// completion sends one more until N were sent), its mean TTFT lies between the
// one lone prefill and the burst's, and the same inputs give bit-identical
// columns.
func TestFiniteRoundsAndDeterminism(t *testing.T) {
	c := testConfig(t, 2, 1)
	w := workload.Spec{ISL: 1000, OSL: 20, Concurrency: 8}
	run := queueing.FiniteRun{Requests: 43, Warmup: 16}
	a, err := QuantitativeFinite(context.Background(), w, c, run, queueing.DefaultClientRTTMs)
	if err != nil {
		t.Fatal(err)
	}
	if a.Diagnostics.SteadyRequests != run.Requests {
		t.Errorf("%d requests measured, want %d", a.Diagnostics.SteadyRequests, run.Requests)
	}
	if m := a.TTFTSteady.Mean(); !(m >= 15 && m <= a.TTFTTransient.Max()) {
		t.Errorf("TTFT mean %v outside [lone prefill 15, burst max %v]", m, a.TTFTTransient.Max())
	}
	b, err := QuantitativeFinite(context.Background(), w, c, run, queueing.DefaultClientRTTMs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Columns(3), b.Columns(3)) {
		t.Errorf("two runs differ:\n%v\n%v", a.Columns(3), b.Columns(3))
	}
}

// TestFiniteInputErrors: bad input is one InputError naming the input and the fix.
func TestFiniteInputErrors(t *testing.T) {
	c := testConfig(t, 1, 1)
	closed := workload.Spec{ISL: 1000, OSL: 10, Concurrency: 4}
	for _, tc := range []struct {
		w    workload.Spec
		run  queueing.FiniteRun
		rtt  float64
		want string
	}{
		{workload.Spec{ISL: 1000, OSL: 10, RateRPS: 2}, queueing.FiniteRun{Requests: 8}, 0, "a finite benchmark run needs a closed loop (concurrency > 0), got concurrency 0"},
		{closed, queueing.FiniteRun{Requests: 0}, 0, "finite run requests = 0: must be in 1..262144"},
		{closed, queueing.FiniteRun{Requests: 8, Warmup: -1}, 0, "finite run warmup = -1"},
		{closed, queueing.FiniteRun{Requests: 8}, math.NaN(), "client_rtt_ms = NaN: must be a finite number in [0, 1e6] ms"},
		{closed, queueing.FiniteRun{Requests: 8}, math.Inf(1), "client_rtt_ms = +Inf"},
	} {
		_, err := QuantitativeFinite(context.Background(), tc.w, c, tc.run, tc.rtt)
		var ie *queueing.InputError
		if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v rtt %v: error %v, want one-line input error containing %q", tc.run, tc.rtt, err, tc.want)
		}
	}
}

// TestFiniteRunBoundWithinTandem: FiniteRun.Validate bounds a run's requests to no
// more than the tandem simulates (maxRequests), so QuantitativeFinite needs no
// bound of its own.
func TestFiniteRunBoundWithinTandem(t *testing.T) {
	if err := (queueing.FiniteRun{Requests: maxRequests + 1}).Validate(); err == nil {
		t.Errorf("a run of %d requests validates; the tandem simulates at most %d", maxRequests+1, maxRequests)
	}
}

// TestFiniteDesyncRefused: the tandem has no desynchronised benchmark run; a run
// marked desync is refused, not answered as the locked one.
func TestFiniteDesyncRefused(t *testing.T) {
	c := testConfig(t, 1, 1)
	_, err := QuantitativeFinite(context.Background(), workload.Spec{ISL: 64, OSL: 8, Concurrency: 2}, c, queueing.FiniteRun{Requests: 8, Desync: true}, 1)
	if err == nil || !strings.Contains(err.Error(), "finite run desync: the tandem runs its clients locked") {
		t.Errorf("desync tandem run: %v", err)
	}
}

// TestFiniteSummaryIdentical: the summary run gives every column of the full
// run but the ITL ones bit for bit (TTFT, TPOT, E2E, throughput, KV), and an
// ITL point mass at 0.
func TestFiniteSummaryIdentical(t *testing.T) {
	for _, tc := range []struct {
		p, d int
		w    workload.Spec
		run  queueing.FiniteRun
	}{
		{2, 1, workload.Spec{ISL: 1000, OSL: 20, Concurrency: 8}, queueing.FiniteRun{Requests: 43, Warmup: 16}},
		{1, 2, workload.Spec{ISL: 500, OSL: 64, Concurrency: 16}, queueing.FiniteRun{Requests: 80}},
	} {
		c := testConfig(t, tc.p, tc.d)
		full, err := QuantitativeFinite(context.Background(), tc.w, c, tc.run, queueing.DefaultClientRTTMs)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := QuantitativeFiniteSummary(context.Background(), tc.w, c, tc.run, queueing.DefaultClientRTTMs)
		if err != nil {
			t.Fatal(err)
		}
		if full.ITL.Len() == 0 || sum.ITL.Mean() != 0 || sum.ITL.Quantile(0.99) != 0 {
			t.Errorf("ITL: full %d atoms, summary mean %v p99 %v; want gaps, and a point mass at 0", full.ITL.Len(), sum.ITL.Mean(), sum.ITL.Quantile(0.99))
		}
		full.ITL, sum.ITL = queueing.PointMass(0), queueing.PointMass(0)
		if !reflect.DeepEqual(full.Columns(3), sum.Columns(3)) || full.ThroughputRPS != sum.ThroughputRPS || !reflect.DeepEqual(full.Diagnostics, sum.Diagnostics) {
			t.Errorf("%d P / %d D: summary differs:\n%v\n%v", tc.p, tc.d, full.Columns(3), sum.Columns(3))
		}
	}
}

// TestFiniteOpenFidelity: an open run's report says how its requests were sent
// — a rate's sends are the W1 stream whether or not a client bound holds them,
// every request at once is W0 — though the tandem sees a bound as clients.
func TestFiniteOpenFidelity(t *testing.T) {
	c := testConfig(t, 1, 1)
	w := workload.Spec{ISL: 1000, OSL: 10, Concurrency: 4}
	for _, c2 := range []struct {
		run  queueing.FiniteRun
		want workload.Tier
	}{
		{queueing.FiniteRun{Requests: 12, Open: true, RateRPS: 5}, workload.W1},
		{queueing.FiniteRun{Requests: 12, Open: true, RateRPS: 5, MaxConcurrency: 2}, workload.W1},
		{queueing.FiniteRun{Requests: 12, Open: true, RateRPS: 5, MaxConcurrency: 2, Paths: 2}, workload.W1},
		{queueing.FiniteRun{Requests: 12, Open: true}, workload.W0},
	} {
		r, err := QuantitativeFinite(context.Background(), w, c, c2.run, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Fidelity != c2.want {
			t.Errorf("%s: fidelity %s, want %s", c2.run.Label(), r.Fidelity, c2.want)
		}
	}
}
