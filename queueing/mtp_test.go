package queueing

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"pgregory.net/rapid"
)

// TestStepTokensMean: the m-th MTP step emits 1 + ⌊m·a⌋ − ⌊(m−1)·a⌋ tokens, so
// m steps emit m + ⌊m·a⌋ (the mean acceptance exactly), each step between 1 and
// 1 + ⌈a⌉; DecodeSteps inverts it, from the first step or any later one.
func TestStepTokensMean(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.IntRange(1, 4).Draw(rt, "k")
		a := rapid.Float64Range(0, float64(k)).Draw(rt, "a")
		m0 := rapid.IntRange(0, 299).Draw(rt, "m0") // steps already taken
		sum, sum0 := 0, 0
		for m := 1; m <= 300; m++ {
			n := engine.StepTokens(a, m)
			if n < 1 || n > 1+int(math.Ceil(a)) {
				rt.Fatalf("StepTokens(%v, %d) = %d: outside [1, 1 + ⌈a⌉]", a, m, n)
			}
			sum += n
			if want := m + int(math.Floor(float64(m)*a)); sum != want {
				rt.Fatalf("%d steps at %v emit %d tokens, want %d", m, a, sum, want)
			}
			if d := DecodeSteps(a, 0, sum); d != m {
				rt.Fatalf("DecodeSteps(%v, 0, %d) = %d, want %d", a, sum, d, m)
			}
			if m == m0 {
				sum0 = sum
			}
			if m > m0 {
				if d := DecodeSteps(a, m0, sum-sum0); d != m-m0 {
					rt.Fatalf("DecodeSteps(%v, %d, %d) = %d, want %d", a, m0, sum-sum0, d, m-m0)
				}
			}
		}
	})
	if engine.StepTokens(0, 5) != 1 || engine.StepTokens(0.85, 0) != 1 {
		t.Fatal("StepTokens without acceptance or before the first step must be 1")
	}
}

// mtpConfig is propConfig drawn until vLLM (MTP, V-S1..V-S4), TensorRT-LLM under
// GUARANTEED_NO_EVICT or SGLang (EAGLE: SetDrafts turns its overlap scheduler and
// mixed chunk off), with one to three MTP drafts and an acceptance in [0, drafts].
func mtpConfig(rt *rapid.T) (workload.Spec, engine.Spec, timing.Timing) {
	for {
		w, e, tm := propConfig(rt)
		if e.Backend == engine.TRTLLM && e.CapacityPolicy == engine.PolicyMaxUtilization {
			continue
		}
		k := rapid.IntRange(1, 3).Draw(rt, "drafts")
		e.SetDrafts(k, rapid.Float64Range(0, float64(k)).Draw(rt, "accepted"))
		if e.Backend == engine.TRTLLM && !e.EnableChunkedPrefill {
			e.MaxNumTokens = max(e.MaxNumTokens, maxPrompt(w)+(1+e.DraftTokens))
		}
		return w, e, tm
	}
}

func maxPrompt(w workload.Spec) int {
	m := w.ISL
	for _, v := range w.ISLQuantiles {
		m = max(m, v)
	}
	return m
}

// TestPropertyMTP: with vLLM or TensorRT-LLM MTP or SGLang EAGLE drafts, over random configurations, the
// quantitative tier and the screening tier both evaluate; the screening bracket
// holds (lo ≤ the evaluator's minimum steady TTFT, a certain hi ≥ its p99); every
// column is finite with monotone quantiles; and every request emits exactly its
// osl tokens, in order, the first at its TTFT and the last at its E2E.
func TestPropertyMTP(t *testing.T) {
	atLeastChecks(t, 300)
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := mtpConfig(rt)
		o := DefaultOptions()
		o.RecordTokenTimes = true
		q, err := QuantitativeWith(context.Background(), w, e, tm, o)
		if err != nil {
			rt.Fatalf("quantitative %+v %+v: %v", w, e, err)
		}
		s, err := Screening(w, e, tm)
		if err != nil {
			rt.Fatalf("screening %+v %+v: %v", w, e, err)
		}
		if q.Unstable || s.Unstable {
			return
		}
		for _, r := range []*Report{q, s} {
			if err := checkColumns(r); err != nil {
				rt.Fatalf("%v\nworkload %+v\nengine %+v", err, w, e)
			}
		}
		if qmin := q.TTFTSteady.Min(); s.TTFTSteadyP99Lo > qmin*(1+1e-9)+1e-9 {
			rt.Fatalf("lo %v > evaluator min steady TTFT %v\nworkload %+v\nengine %+v", s.TTFTSteadyP99Lo, qmin, w, e)
		}
		if p99 := q.TTFTSteady.Quantile(0.99); s.Diagnostics.BracketCertain && s.TTFTSteadyP99Hi < p99*(1-1e-9) {
			rt.Fatalf("certain hi %v < evaluator p99 %v\nworkload %+v\nengine %+v", s.TTFTSteadyP99Hi, p99, w, e)
		}
		for _, r := range q.Requests {
			if len(r.TokenMs) != r.OSL {
				rt.Fatalf("request emitted %d tokens, osl %d\nworkload %+v\nengine %+v", len(r.TokenMs), r.OSL, w, e)
			}
			for i := 1; i < len(r.TokenMs); i++ {
				if r.TokenMs[i] < r.TokenMs[i-1] {
					rt.Fatalf("token %d at %v before token %d at %v", i, r.TokenMs[i], i-1, r.TokenMs[i-1])
				}
			}
			if n := len(r.TokenMs); n > 0 && (r.TokenMs[0] != r.ArrivalMs+r.TTFTMs && math.Abs(r.TokenMs[0]-r.ArrivalMs-r.TTFTMs) > 1e-9*r.TokenMs[0] ||
				math.Abs(r.TokenMs[n-1]-r.ArrivalMs-r.E2EMs) > 1e-9*r.TokenMs[n-1]) {
				rt.Fatalf("tokens %v … %v, arrival %v, TTFT %v, E2E %v", r.TokenMs[0], r.TokenMs[n-1], r.ArrivalMs, r.TTFTMs, r.E2EMs)
			}
		}
	})
}

// TestPropertyDrafterSchedulesAsMTP: an EAGLE3 head (engine.Spec.DraftMethod,
// DraftModel) is scheduled exactly as the model's own MTP layers on every
// backend — vLLM's proposer path (V-S1..V-S4), SGLang's EAGLE worker (S-R3) and
// TensorRT-LLM's one-model EAGLE3 mode, which shares one-model MTP's scheduling
// (T-R3) — so over random configurations the quantitative report is identical
// with and without the head: the drafter changes the pass timing only, and that
// is the timing's (perfdb prices the head as one target-sized layer per draft).
func TestPropertyDrafterSchedulesAsMTP(t *testing.T) {
	atLeastChecks(t, 100)
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := mtpConfig(rt)
		head := e
		head.DraftMethod, head.DraftModel = "eagle3", "org/EAGLE3-head"
		if err := head.Validate(); err != nil {
			rt.Fatalf("an EAGLE3 head on %s: %v", e.Backend, err)
		}
		o := DefaultOptions()
		a, errA := QuantitativeWith(context.Background(), w, e, tm, o)
		b, errB := QuantitativeWith(context.Background(), w, head, tm, o)
		if (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error() {
			rt.Fatalf("errors differ: %v / %v", errA, errB)
		}
		if errA == nil && !reflect.DeepEqual(a, b) {
			rt.Fatalf("%s: the report with an EAGLE3 head differs from MTP's\nworkload %+v\nengine %+v", e.Backend, w, e)
		}
	})
}
