package calibrate

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// TestMemoOn: the fit's memo evaluates each adjustment of its sample set once
// and returns the same predictions after; another sample set (a fold's test
// rows), and an evaluation that failed, are not remembered.
func TestMemoOn(t *testing.T) {
	calls := 0
	fail := false
	f := func(_ context.Context, ss []Sample, adj refine.PassAdjust) ([][2]float64, error) {
		calls++
		if fail {
			return nil, errors.New("boom")
		}
		out := make([][2]float64, len(ss))
		for i := range out {
			out[i] = [2]float64{adj.PrefillScale * float64(i+1), adj.DecodeScale}
		}
		return out, nil
	}
	ss := make([]Sample, 3)
	other := make([]Sample, 3)
	m := memoOn(ss, f)
	ctx := context.Background()
	a := refine.PassAdjust{PrefillScale: 1.5, DecodeScale: 0.9}
	p1, err := m(ctx, ss, a)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := m(ctx, ss, a)
	if calls != 1 || p2[2] != p1[2] || p1[2] != [2]float64{4.5, 0.9} {
		t.Errorf("same adjustment: %d evaluations, predictions %v then %v", calls, p1, p2)
	}
	if _, _ = m(ctx, other, a); calls != 2 {
		t.Errorf("another sample set: %d evaluations, want it evaluated (2)", calls)
	}
	if _, _ = m(ctx, other, a); calls != 3 {
		t.Errorf("another sample set again: %d evaluations, want it not remembered (3)", calls)
	}
	fail = true
	b := refine.PassAdjust{PrefillScale: 2, DecodeScale: 1}
	if _, err := m(ctx, ss, b); err == nil {
		t.Fatal("the failing evaluation succeeded")
	}
	fail = false
	if p, err := m(ctx, ss, b); err != nil || calls != 5 || p[0] != [2]float64{2, 1} {
		t.Errorf("after a failure: %v, %d evaluations, %v; want it evaluated again", err, calls, p)
	}
}

// countingEval answers the quantitative evaluations from the point's ISL and the
// run's request count, counting them (the other methods are not used).
type countingEval struct {
	Evaluator
	calls atomic.Int32
}

func (e *countingEval) predict(in store.PointInputs, run int, adj refine.PassAdjust) store.Quantitative {
	e.calls.Add(1)
	var q store.Quantitative
	q.V[store.QTTFTSteadyMean] = float64(in.ISL+run) * adj.PrefillScale
	q.V[store.QTTFTSteadyP50] = float64(in.ISL+run) * adj.PrefillScale / 2
	q.V[store.QTPOTMean] = float64(in.OSL) * adj.DecodeScale
	return q
}

func (e *countingEval) QuantitativeAdjusted(_ context.Context, in store.PointInputs, adj refine.PassAdjust) (store.Quantitative, error) {
	return e.predict(in, 0, adj), nil
}

func (e *countingEval) QuantitativeRunSummaryAdjusted(_ context.Context, in store.PointInputs, adj refine.PassAdjust, run queueing.FiniteRun) (store.Quantitative, error) {
	return e.predict(in, run.Requests, adj), nil
}

// TestQuantEvalDistinctRuns: samples of the same point and run are evaluated
// once, and every copy gets that prediction in its own column (a copy measured
// at the median reads the p50); another run or the steady state of the same
// point is evaluated apart.
func TestQuantEvalDistinctRuns(t *testing.T) {
	in := store.PointInputs{Model: "m", ISL: 100, OSL: 10}
	other := in
	other.ISL = 200
	run, run2 := &queueing.FiniteRun{Requests: 20}, &queueing.FiniteRun{Requests: 40}
	mk := func(in store.PointInputs, r *queueing.FiniteRun, ttftCol int) Sample {
		return Sample{In: in, Run: r, ttftCol: ttftCol, tpotCol: store.QTPOTMean}
	}
	ss := []Sample{mk(in, run, store.QTTFTSteadyMean), mk(other, run, store.QTTFTSteadyMean), mk(in, &queueing.FiniteRun{Requests: 20}, store.QTTFTSteadyP50),
		mk(in, run2, store.QTTFTSteadyMean), mk(in, nil, store.QTTFTSteadyMean), mk(in, nil, store.QTTFTSteadyMean)}
	ev := &countingEval{}
	got, err := quantEval(ev, 2, 0)(context.Background(), ss, refine.PassAdjust{PrefillScale: 2, DecodeScale: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]float64{{240, 30}, {440, 30}, {120, 30}, {280, 30}, {200, 30}, {200, 30}}
	if ev.calls.Load() != 4 || !slices.Equal(got, want) {
		t.Errorf("%d evaluations, predictions %v; want 4 evaluations and %v", ev.calls.Load(), got, want)
	}
}

// TestFirstError: Fit reports the first failing fit in job order, skipping the
// cancellations that failure caused in the fits running beside it — unless the
// caller's own context was cancelled, which is then the error.
func TestFirstError(t *testing.T) {
	boom, later := errors.New("boom"), errors.New("later")
	errs := []error{nil, context.Canceled, boom, later}
	if err := firstError(context.Background(), errs); err != boom {
		t.Errorf("live context: %v, want boom", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := firstError(done, errs); err != context.Canceled {
		t.Errorf("cancelled caller: %v, want context.Canceled", err)
	}
	if err := firstError(context.Background(), []error{nil, context.Canceled}); err != context.Canceled {
		t.Errorf("only a cancellation: %v, want it", err)
	}
	if err := firstError(context.Background(), []error{nil, nil}); err != nil {
		t.Errorf("no error: %v", err)
	}
}
