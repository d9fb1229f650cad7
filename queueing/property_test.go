package queueing

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// propConfig draws one random operating point of any backend (small enough to keep
// 2,000 quantitative evaluations within a few seconds).
func propConfig(rt *rapid.T) (workload.Spec, engine.Spec, timing.Timing) {
	backend := rapid.SampledFrom([]engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang}).Draw(rt, "backend")
	e, _ := engine.Defaults(backend, "")
	isl := rapid.IntRange(8, 3000).Draw(rt, "isl")
	w := workload.Spec{ISL: isl, OSL: rapid.IntRange(1, 48).Draw(rt, "osl")}
	if rapid.Bool().Draw(rt, "prefix") {
		w.Prefix = rapid.IntRange(0, isl-1).Draw(rt, "prefixLen")
	}
	if rapid.IntRange(0, 5).Draw(rt, "w2") == 0 {
		w.ISLQuantiles = []int{max(w.Prefix+1, isl/2), isl, isl + isl/2}
		w.OSLQuantiles = []int{max(1, w.OSL/3), w.OSL, 2 * w.OSL}
	}
	open := rapid.IntRange(0, 4).Draw(rt, "open") == 0
	if open {
		w.NumRequests = rapid.IntRange(64, 400).Draw(rt, "n")
	} else {
		w.Concurrency = rapid.IntRange(1, 40).Draw(rt, "c")
		if rapid.Bool().Draw(rt, "turn") {
			w.TurnaroundMs = rapid.Float64Range(0, 200).Draw(rt, "turnaround")
		}
	}
	maxISL := isl
	if len(w.ISLQuantiles) > 0 {
		maxISL = w.ISLQuantiles[2]
	}
	budget := rapid.IntRange(64, 4096).Draw(rt, "budget")
	chunked := rapid.Bool().Draw(rt, "chunked")
	cap := rapid.IntRange(1, 64).Draw(rt, "cap")
	switch backend {
	case engine.VLLM:
		e.MaxNumBatchedTokens, e.MaxNumSeqs, e.EnableChunkedPrefill = budget, cap, chunked
		if !chunked {
			e.MaxNumBatchedTokens = max(budget, maxISL-w.Prefix)
		}
		e.AsyncScheduling = rapid.Bool().Draw(rt, "async")
		if rapid.IntRange(0, 3).Draw(rt, "thr") == 0 {
			e.LongPrefillTokenThreshold = rapid.IntRange(1, 2048).Draw(rt, "threshold")
		}
	case engine.TRTLLM:
		e.MaxNumTokens, e.MaxBatchSize, e.EnableChunkedPrefill = budget, cap, chunked
		if !chunked {
			e.MaxNumTokens = max(budget, maxISL)
		}
		e.AsyncScheduling = rapid.Bool().Draw(rt, "async")
		e.BlockSize = rapid.SampledFrom([]int{1, 16, 32}).Draw(rt, "tpb")
		if rapid.IntRange(0, 2).Draw(rt, "bw") == 0 { // batch waiting (T-R6)
			e.BatchWaitTimeoutIters = rapid.IntRange(1, 30).Draw(rt, "bwIters")
			e.BatchWaitMaxTokensRatio = rapid.Float64Range(0.05, 1).Draw(rt, "bwRatio")
		}
		if rapid.Bool().Draw(rt, "kv") {
			per := ceilDiv(maxISL+2*w.OSL, e.BlockSize) * e.BlockSize
			e.KVCapacityTokens = per * rapid.IntRange(1, 50).Draw(rt, "kvreqs")
		}
	case engine.SGLang:
		e.ChunkedPrefillSize, e.MaxNumSeqs, e.EnableChunkedPrefill = budget, cap, chunked
		e.EnableMixedChunk = rapid.Bool().Draw(rt, "mixed")
		e.MaxPrefillTokens = rapid.IntRange(64, 16384).Draw(rt, "maxprefill")
		e.BlockSize = rapid.SampledFrom([]int{1, 16}).Draw(rt, "page")
		e.ChunkedPrefillSize = max(e.ChunkedPrefillSize, e.BlockSize)
		e.AsyncScheduling = rapid.Bool().Draw(rt, "async") // the overlap scheduler (§3.2)
		if rapid.IntRange(0, 2).Draw(rt, "recv") == 0 {
			e.SchedulerRecvInterval = rapid.IntRange(1, 40).Draw(rt, "recvEvery") // S-R7
		}
	}
	if rapid.Bool().Draw(rt, "stage") {
		e.StageMs = rapid.Float64Range(0, 50).Draw(rt, "stageMs")
	}
	lin := timing.Linear{
		BaseMs:            rapid.Float64Range(0.5, 20).Draw(rt, "base"),
		PrefillMsPerToken: rapid.Float64Range(0, 0.1).Draw(rt, "pre"),
		DecodeMsPerRow:    rapid.Float64Range(0, 0.5).Draw(rt, "dec"),
		CtxMsPerToken:     rapid.Float64Range(0, 1e-3).Draw(rt, "ctx"),
	}
	var tm timing.Timing = lin
	if rapid.Bool().Draw(rt, "roofline") {
		tm = timing.Roofline{
			BaseMs: lin.BaseMs, WeightsMs: rapid.Float64Range(0, 10).Draw(rt, "weights"),
			TokenMs: lin.PrefillMsPerToken, AttnMsPerPair: rapid.Float64Range(0, 1e-5).Draw(rt, "attn"),
			KVMsPerToken: rapid.Float64Range(0, 1e-3).Draw(rt, "kvms"),
		}
	}
	if open {
		// ρ between 0.05 and 0.7 of a crude one-at-a-time capacity.
		svc := lin.BaseMs*float64(1+w.OSL) + lin.PrefillMsPerToken*float64(isl) + float64(w.OSL)*lin.DecodeMsPerRow
		w.RateRPS = rapid.Float64Range(0.05, 0.7).Draw(rt, "rho") * 1000 / svc * float64(min(cap, 8))
	}
	return w, e, tm
}

// checkColumns fails on a non-finite column or non-monotone quantiles.
func checkColumns(r *Report) error {
	cols := r.Columns(1)
	for k, v := range cols {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0) || f < 0) {
			return fmt.Errorf("%s column %s = %v", r.Tier, k, f)
		}
	}
	for _, seq := range [][]string{
		{"ttft_steady_p50", "ttft_steady_p75", "ttft_steady_p90", "ttft_steady_p95", "ttft_steady_p99", "ttft_steady_p999"},
		{"itl_p50", "itl_p99"}, {"tpot_p50", "tpot_p99"}, {"e2e_p50", "e2e_p99"},
	} {
		for i := 1; i < len(seq); i++ {
			if cols[seq[i]].(float64) < cols[seq[i-1]].(float64) {
				return fmt.Errorf("%s: %s %v < %s %v", r.Tier, seq[i], cols[seq[i]], seq[i-1], cols[seq[i-1]])
			}
		}
	}
	return nil
}

// TestPropertyBracketAndQuantiles: over ≥ 2,000 random configurations of all three
// backends, the screening bracket holds against the quantitative evaluator (lo ≤
// its minimum steady TTFT; hi ≥ its p99 where the row is declared certain), every
// quantile sequence is monotone and nothing is non-finite.
func TestPropertyBracketAndQuantiles(t *testing.T) {
	atLeastChecks(t, 2000)
	certain, total := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		q, err := Quantitative(context.Background(), w, e, tm)
		if err != nil {
			rt.Fatalf("quantitative %+v %+v: %v", w, e, err)
		}
		s, err := Screening(w, e, tm)
		if err != nil {
			rt.Fatalf("screening %+v %+v: %v", w, e, err)
		}
		total++
		if q.Unstable || s.Unstable {
			return
		}
		for _, r := range []*Report{q, s} {
			if err := checkColumns(r); err != nil {
				rt.Fatalf("%v\nworkload %+v\nengine %+v", err, w, e)
			}
		}
		qmin := q.TTFTSteady.Min()
		if s.TTFTSteadyP99Lo > qmin*(1+1e-9)+1e-9 {
			rt.Fatalf("lo %v > evaluator min steady TTFT %v\nworkload %+v\nengine %+v", s.TTFTSteadyP99Lo, qmin, w, e)
		}
		if s.Diagnostics.BracketCertain {
			certain++
			if p99 := q.TTFTSteady.Quantile(0.99); s.TTFTSteadyP99Hi < p99*(1-1e-9) {
				rt.Fatalf("certain hi %v < evaluator p99 %v\nworkload %+v\nengine %+v", s.TTFTSteadyP99Hi, p99, w, e)
			}
		}
		if s.TTFTSteadyP99Lo > s.TTFTSteadyP99Hi {
			rt.Fatalf("lo %v > hi %v", s.TTFTSteadyP99Lo, s.TTFTSteadyP99Hi)
		}
	})
	t.Logf("%d configurations, %d with a certain bracket", total, certain)
}

// atLeastChecks raises rapid's -rapid.checks to n for this test unless the command
// line asked for more.
func atLeastChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil {
		return
	}
	old := f.Value.String()
	if v, err := strconv.Atoi(old); err == nil && v >= n {
		return
	}
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestFastForwardIsExact: the decode-stretch fast path reproduces the pass-by-pass
// recursion (same passes, every column equal up to summation order).
func TestFastForwardIsExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		a, err := QuantitativeWith(context.Background(), w, e, tm, Options{})
		if err != nil {
			rt.Fatal(err)
		}
		b, err := QuantitativeWith(context.Background(), w, e, tm, Options{NoFastForward: true})
		if err != nil {
			rt.Fatal(err)
		}
		if a.Unstable != b.Unstable || a.Diagnostics.Passes != b.Diagnostics.Passes {
			rt.Fatalf("unstable %v/%v passes %d/%d", a.Unstable, b.Unstable, a.Diagnostics.Passes, b.Diagnostics.Passes)
		}
		ca, cb := a.Columns(1), b.Columns(1)
		for k, va := range ca {
			fa, ok := va.(float64)
			if !ok {
				continue
			}
			fb := cb[k].(float64)
			if math.Abs(fa-fb) > 1e-9*math.Max(1, math.Abs(fb)) {
				rt.Fatalf("%s: fast %v, pass-by-pass %v\nworkload %+v\nengine %+v", k, fa, fb, w, e)
			}
		}
	})
}

// TestBlockStretchIsExact: a decode stretch priced from its row count and summed
// context (Linear's DecodeOnlyMs, fastForward's block path) gives the report the
// per-row path gives (the same Linear behind timing.Func, which hides
// DecodeOnlyMs) bit for bit, under the default options and the burst.
func TestBlockStretchIsExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		if _, ok := tm.(decodeOnlyPricer); !ok {
			rt.Fatalf("propConfig's timing %T has no DecodeOnlyMs", tm)
		}
		rows := timing.Func(tm.PassMs)
		for _, o := range []Options{DefaultOptions(), {}} {
			a, errA := QuantitativeWith(context.Background(), w, e, tm, o)
			b, errB := QuantitativeWith(context.Background(), w, e, rows, o)
			if fmt.Sprint(errA) != fmt.Sprint(errB) || !reflect.DeepEqual(a, b) {
				rt.Fatalf("options %+v: block and per-row reports differ (errors %v / %v)", o, errA, errB)
			}
		}
	})
}

// patchyDecode is a decode-only pricer (Linear, Roofline) whose DecodeOnlyMs
// fails now and then (an error, or a price that is not one), as a perf-data
// timing misses: fastForward must then price that pass row by row, its contexts
// advanced to the pass's.
type patchyDecode struct {
	timing.Timing
	d decodeOnlyPricer
}

func (p patchyDecode) DecodeOnlyMs(rows, ctx int) (float64, error) {
	switch ctx % 5 {
	case 0:
		return 0, errors.New("miss")
	case 1:
		return 0, nil
	}
	return p.d.DecodeOnlyMs(rows, ctx)
}

// TestBlockStretchFallbackIsExact: a block stretch whose decode-only price fails
// on some passes falls back to the per-row price of those passes, giving the
// per-row report bit for bit.
func TestBlockStretchFallbackIsExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		d, ok := tm.(decodeOnlyPricer)
		if !ok {
			rt.Fatalf("propConfig's timing %T has no DecodeOnlyMs", tm)
		}
		a, errA := QuantitativeWith(context.Background(), w, e, patchyDecode{tm, d}, Options{})
		b, errB := QuantitativeWith(context.Background(), w, e, timing.Func(tm.PassMs), Options{})
		if fmt.Sprint(errA) != fmt.Sprint(errB) || !reflect.DeepEqual(a, b) {
			rt.Fatalf("patchy block and per-row reports differ (errors %v / %v)", errA, errB)
		}
	})
}

// TestRunScratchLeavesNoState: runs that share one runScratch in turn (a stagger
// evaluation's burst and phases) give each the report a run with fresh buffers
// gives, bit for bit: no request, bin, pool index or checkpoint of one run is read
// by the next.
func TestRunScratchLeavesNoState(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		if w.Concurrency == 0 {
			w.NumRequests, w.Concurrency = 0, rapid.IntRange(1, 40).Draw(rt, "c")
		}
		b, err := checkInputs(w, e, tm)
		if err != nil {
			rt.Skip(err)
		}
		burst := Options{transientOnly: true}
		runs := []Options{burst}
		for i := range 3 {
			o := DefaultOptions()
			o.spreadMs = rapid.Float64Range(1, 2000).Draw(rt, fmt.Sprintf("spread%d", i))
			o.WindowGenerations = rapid.IntRange(1, 4).Draw(rt, fmt.Sprintf("win%d", i))
			runs = append(runs, o)
		}
		buf := &runScratch{}
		for i, o := range runs {
			a, errA := quantitativeRun(context.Background(), w, e, tm, o, b, buf)
			f, errF := quantitativeRun(context.Background(), w, e, tm, o, b, nil)
			if fmt.Sprint(errA) != fmt.Sprint(errF) || !reflect.DeepEqual(a, f) {
				rt.Fatalf("run %d (%+v): shared-scratch and fresh reports differ (errors %v / %v)", i, o, errA, errF)
			}
		}
	})
}
