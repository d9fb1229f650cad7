package queueing

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/workload"
	"pgregory.net/rapid"
)

// TestOpenSendsSemaphore: the schedule never has more than MaxConcurrency
// requests in flight, sends every request exactly once, in non-decreasing time,
// never before its arrival instant, and a request that waited is sent the delay
// after the completion that freed its seat.
func TestOpenSendsSemaphore(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(rt, "n")
		capN := rapid.IntRange(0, 40).Draw(rt, "cap")
		rate := rapid.Float64Range(0.1, 200).Draw(rt, "rate")
		delay := rapid.Float64Range(0, 5).Draw(rt, "delay")
		service := rapid.Float64Range(1, 2000).Draw(rt, "service")
		f := FiniteRun{Requests: n, Open: true, RateRPS: rate, MaxConcurrency: capN}
		o, err := NewOpenSends(f, rapid.IntRange(0, 3).Draw(rt, "path"), delay)
		if err != nil {
			rt.Fatal(err)
		}
		at := slicesClone(o.at)
		// Each send finishes `service` ms later (a fixed service time: completions
		// in send order).
		var sends, done []float64
		for _, s := range o.Start() {
			sends = append(sends, s)
			done = append(done, s+service)
		}
		for k := 0; k < len(done); k++ {
			inFlight := 0
			for j := range sends {
				if sends[j] <= done[k] && (j >= k) {
					inFlight++
				}
			}
			if capN > 0 && inFlight > capN {
				rt.Fatalf("%d requests in flight at %v, cap %d", inFlight, done[k], capN)
			}
			if s, ok := o.Completed(done[k]); ok {
				j := len(sends)
				if s < at[j] {
					rt.Fatalf("request %d sent at %v before its arrival %v", j, s, at[j])
				}
				if at[j] <= done[k] && s != done[k]+delay {
					rt.Fatalf("request %d waited (arrival %v ≤ completion %v) but is sent at %v", j, at[j], done[k], s)
				}
				sends = append(sends, s)
				done = append(done, s+service)
			}
		}
		if len(sends) != n {
			rt.Fatalf("%d sends, want %d", len(sends), n)
		}
		for j := 1; j < n; j++ {
			if sends[j] < sends[j-1] {
				rt.Fatalf("send %d at %v before send %d at %v", j, sends[j], j-1, sends[j-1])
			}
		}
		if capN == 0 && !reflect.DeepEqual(sends, at) {
			rt.Fatalf("without a bound every request is sent at its arrival")
		}
	})
}

func slicesClone(x []float64) []float64 { return append([]float64(nil), x...) }

// TestOpenRunIdentities: an open run at a rate far below capacity is a sequence of
// lone requests (each TTFT the lone prefill, throughput ≈ the realised rate over the
// span); every request at once equals the closed loop of N clients sending one
// request each; a binding bound lowers the queueing; pooled paths are the union
// of the single paths.
func TestOpenRunIdentities(t *testing.T) {
	ctx := context.Background()
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 8192
	w := workload.Spec{ISL: 2048, OSL: 64, Concurrency: 7} // the concurrency is ignored by open runs
	o := DefaultOptions()

	lone, err := QuantitativeFinite(ctx, workload.Spec{ISL: 2048, OSL: 64, Concurrency: 1}, e, benchLin, o, FiniteRun{Requests: 1})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := QuantitativeFinite(ctx, w, e, benchLin, o, FiniteRun{Requests: 50, Open: true, RateRPS: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(slow.TTFTSteady.Max() - lone.TTFTSteady.Mean()); d > 1e-9 {
		t.Errorf("rate 0.01 rps: TTFT max %v, lone request %v", slow.TTFTSteady.Max(), lone.TTFTSteady.Mean())
	}

	once, err := QuantitativeFinite(ctx, w, e, benchLin, o, FiniteRun{Requests: 24, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := QuantitativeFinite(ctx, workload.Spec{ISL: 2048, OSL: 64, Concurrency: 24}, e, benchLin, o, FiniteRun{Requests: 24})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]float64{{once.TTFTSteady.Mean(), closed.TTFTSteady.Mean()}, {once.TTFTSteady.Quantile(0.99), closed.TTFTSteady.Quantile(0.99)},
		{once.TPOT.Mean(), closed.TPOT.Mean()}, {once.ThroughputRPS, closed.ThroughputRPS}} {
		if math.Abs(c[0]-c[1]) > 1e-9*math.Max(1, c[1]) {
			t.Errorf("every request at once %v, closed loop of N clients %v", c[0], c[1])
		}
	}

	free, err := QuantitativeFinite(ctx, w, e, benchLin, o, FiniteRun{Requests: 200, Open: true, RateRPS: 12})
	if err != nil {
		t.Fatal(err)
	}
	bound, err := QuantitativeFinite(ctx, w, e, benchLin, o, FiniteRun{Requests: 200, Open: true, RateRPS: 12, MaxConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !(bound.TTFTSteady.Mean() < free.TTFTSteady.Mean()) || !(bound.ThroughputRPS < free.ThroughputRPS) {
		t.Errorf("a bound of 2 in flight: TTFT %v vs %v unbounded, throughput %v vs %v (the wait for a seat is not TTFT; fewer in flight serve less)",
			bound.TTFTSteady.Mean(), free.TTFTSteady.Mean(), bound.ThroughputRPS, free.ThroughputRPS)
	}

	pooled, err := QuantitativeFinite(ctx, w, e, benchLin, o, FiniteRun{Requests: 60, Open: true, RateRPS: 12, Paths: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkInputs(workload.Spec{ISL: 2048, OSL: 64, RateRPS: 12}, e, benchLin)
	if err != nil {
		t.Fatal(err)
	}
	var sum, x float64
	run := FiniteRun{Requests: 60, Open: true, RateRPS: 12, Paths: 3}
	ats, err := run.Arrivals(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p < 3; p++ {
		r, err := finiteOpenPath(ctx, workload.Spec{ISL: 2048, OSL: 64, RateRPS: 12}, e, benchLin, o, run, b, ats[p], false)
		if err != nil {
			t.Fatal(err)
		}
		sum += r.TTFTSteady.Mean() * 60
		x += r.ThroughputRPS / 3
	}
	if got, want := pooled.TTFTSteady.Mean(), sum/180; math.Abs(got-want) > 1e-9*want {
		t.Errorf("pooled TTFT mean %v, the paths' %v", got, want)
	}
	if math.Abs(pooled.ThroughputRPS-x) > 1e-9*x || len(pooled.Requests) != 180 || pooled.Requests[179].Phase != 3 {
		t.Errorf("pooled throughput %v (paths' mean %v), %d records", pooled.ThroughputRPS, x, len(pooled.Requests))
	}
}

// TestOpenRunValidate: malformed open runs are one-line errors naming the field.
func TestOpenRunValidate(t *testing.T) {
	for _, c := range []struct {
		f    FiniteRun
		want string
	}{
		{FiniteRun{Requests: 10, RateRPS: 2}, "open-loop run (open: true)"},
		{FiniteRun{Requests: 10, Open: true, Desync: true}, "desync applies to closed loops"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: math.Inf(1)}, "rate_rps = +Inf"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: -1}, "rate_rps = -1"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: 1, MaxConcurrency: -2}, "max_concurrency = -2"},
		{FiniteRun{Requests: 10, Open: true, MaxConcurrency: 4}, "closed loop of 4 clients"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: 1, Paths: 65}, "paths = 65"},
		{FiniteRun{Requests: 10, Ramp: RampLinear, RampEndRPS: 2}, "open-loop run (open: true)"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: 1, RampEndRPS: 2}, "ramp_end_rps = 2 without ramp"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: 1, Ramp: "step", RampEndRPS: 2}, `ramp = "step": want linear or exponential`},
		{FiniteRun{Requests: 10, Open: true, Ramp: RampLinear, RampEndRPS: 2}, "a linear ramp starts at rate_rps > 0"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: 3, Ramp: RampExponential, RampEndRPS: 2}, "ramp_end_rps = 2: must be a finite rate ≥ rate_rps = 3"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: 1, Ramp: RampLinear, RampEndRPS: math.Inf(1)}, "ramp_end_rps = +Inf"},
		{FiniteRun{Requests: 10, Open: true, RateRPS: 1, Ramp: RampLinear, RampEndRPS: 2, Constant: true}, "constant sends have none"},
	} {
		err := c.f.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error %v, want one line with %q", c.f, err, c.want)
		}
	}
	if err := (FiniteRun{Requests: 10, Open: true}).ValidateClosedLoop(workload.Spec{Concurrency: 4}); err == nil {
		t.Errorf("an open run passed as a closed loop")
	}
	if got := (FiniteRun{Requests: 500, Open: true, RateRPS: 2.5, MaxConcurrency: 32, Paths: 5}).Label(); got != "finite:n=500,open,rate=2.5,cap=32,paths=5" {
		t.Errorf("label %q", got)
	}
	if got := (FiniteRun{Requests: 1280, Warmup: 128}).Label(); got != "finite:n=1280,warmup=128" {
		t.Errorf("closed label changed: %q", got)
	}
}

// TestOpenRunRamp: a ramped run (vllm bench serve --ramp-up-strategy) draws
// request j's gap at the rate reached at progress j/(n − 1): a ramp whose end is
// its start is the plain run (to rounding), the gaps are the plain path's at the
// start rate times start/rate(j), the ramp's mean span Σ 1000/rate(j) holds over
// many paths, the exponential rate is geometric between its ends, and the label
// names the ramp (the prediction cache keys runs by it).
func TestOpenRunRamp(t *testing.T) {
	const n = 400
	plain := FiniteRun{Requests: n, Open: true, RateRPS: 2, GammaShape: 0.5}
	flat := plain
	flat.Ramp, flat.RampEndRPS = RampLinear, 2
	a, err := plain.Arrivals(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := flat.Arrivals(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for j := range a[0] {
		if math.Abs(a[0][j]-b[0][j]) > 1e-9*math.Max(a[0][j], 1) {
			t.Fatalf("flat ramp: arrival %d at %v, plain run %v", j, b[0][j], a[0][j])
		}
	}
	for _, kind := range []string{RampLinear, RampExponential} {
		r := plain
		r.Ramp, r.RampEndRPS = kind, 18
		ps, err := r.Arrivals(0, 64)
		if err != nil {
			t.Fatal(err)
		}
		if ps[0][0] != 0 || math.Abs((ps[0][1]-ps[0][0])-(a[0][1]-a[0][0])*2/r.rampRate(1, n)) > 1e-9 {
			t.Errorf("%s: first gaps %v, want the plain path's at 2 rps times 2/rate(1)", kind, ps[0][:2])
		}
		want := 0.0
		for j := 1; j < n; j++ {
			want += 1000 / r.rampRate(j, n)
		}
		span := 0.0
		for _, at := range ps {
			span += at[n-1] / float64(len(ps))
		}
		if math.Abs(span/want-1) > 0.03 {
			t.Errorf("%s ramp 2 → 18 rps: mean span %v ms over 64 paths, want Σ 1000/rate(j) = %v", kind, span, want)
		}
	}
	e := FiniteRun{Requests: 3, Open: true, RateRPS: 1, Ramp: RampExponential, RampEndRPS: 4}
	if got := []float64{e.rampRate(0, 3), e.rampRate(1, 3), e.rampRate(2, 3)}; got[0] != 1 || math.Abs(got[1]-2) > 1e-12 || got[2] != 4 {
		t.Errorf("exponential 1 → 4 over 3 requests: rates %v, want 1, 2, 4", got)
	}
	if got := (FiniteRun{Requests: 500, Open: true, RateRPS: 1, Ramp: RampLinear, RampEndRPS: 8.5, MaxConcurrency: 16}).Label(); got != "finite:n=500,open,rate=1,ramp=linear:8.5,cap=16" {
		t.Errorf("label %q", got)
	}
	if got := (FiniteRun{Requests: 500, Open: true, RateRPS: 1, Ramp: RampLinear, RampEndRPS: 8.5}).OpenLoad(workload.Spec{ISL: 10, OSL: 10}); got.RateRPS != 8.5 {
		t.Errorf("a ramp's load is its peak rate: got %v rps", got.RateRPS)
	}
}

// TestFiniteRunShapes: a run that states its requests' lengths (FiniteRun.Shapes)
// is the same run on the workload with those quantile points (W2), closed
// (locked and desynchronised) and open; malformed shapes are one-line errors;
// the label names the shapes by a hash.
func TestFiniteRunShapes(t *testing.T) {
	ctx := context.Background()
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 4096
	isl, osl := []int{256, 900, 2000, 3100}, []int{16, 64, 200}
	shapes := EncodeShapes(isl, osl)
	if shapes != "256,900,2000,3100;16,64,200" {
		t.Fatalf("EncodeShapes %q", shapes)
	}
	w := workload.Spec{ISL: 1564, OSL: 93, Concurrency: 8}
	w2 := w
	w2.ISLQuantiles, w2.OSLQuantiles = isl, osl
	for _, run := range []FiniteRun{{Requests: 40}, {Requests: 40, Desync: true}, {Requests: 60, Open: true, RateRPS: 5, Paths: 2}} {
		want, err := QuantitativeFinite(ctx, w2, e, benchLin, DefaultOptions(), run)
		if err != nil {
			t.Fatal(err)
		}
		stated := run
		stated.Shapes = shapes
		got, err := QuantitativeFinite(ctx, w, e, benchLin, DefaultOptions(), stated)
		if err != nil {
			t.Fatal(err)
		}
		if got.TTFTSteady.Mean() != want.TTFTSteady.Mean() || got.TPOT.Quantile(0.99) != want.TPOT.Quantile(0.99) ||
			got.ThroughputRPS != want.ThroughputRPS || got.Fidelity != workload.W2 {
			t.Errorf("%s: TTFT %v vs %v, TPOT p99 %v vs %v, throughput %v vs %v, fidelity %s", stated.Label(),
				got.TTFTSteady.Mean(), want.TTFTSteady.Mean(), got.TPOT.Quantile(0.99), want.TPOT.Quantile(0.99), got.ThroughputRPS, want.ThroughputRPS, got.Fidelity)
		}
	}
	for _, bad := range []string{"1,2", "0;5", "a;b", strings.Repeat("1,", 64) + "1;"} {
		err := FiniteRun{Requests: 4, Shapes: bad}.Validate()
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("shapes %q: error %v", bad, err)
		}
	}
	if l := (FiniteRun{Requests: 4, Shapes: shapes}).Label(); !strings.HasPrefix(l, "finite:n=4,shapes=") || len(l) != len("finite:n=4,shapes=")+8 {
		t.Errorf("label %q", l)
	}
}
