package gate

import (
	"context"
	"math"
	"testing"
)

// TestGateDetectsDrift: the gate is not vacuous — a scheduling difference between
// the sides (the oracle given a smaller token budget, i.e. deeper chunking) shows up
// as residuals over tolerance.
func TestGateDetectsDrift(t *testing.T) {
	f := Families()[1] // vllm c8 isl2048 osl256 b8192
	m, rep, err := runModel(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	g := f
	g.Engine.MaxNumBatchedTokens = 512
	o, err := runOracle(context.Background(), g, rep)
	if err != nil {
		t.Fatal(err)
	}
	r := residual(m.TTFTMean, o.TTFTMean)
	if math.Abs(r) <= tolerances[0] {
		t.Fatalf("TTFT mean residual %.3f with budgets 8192 vs 512: the gate would not see the drift", r)
	}
}

// TestMeasureIdentities: osl 1 has no gaps (ITL 0, TPOT 0); throughput is steady
// requests over the steady span; the quantile rule is the Distribution's.
func TestMeasureIdentities(t *testing.T) {
	steady := []rec{{slot: -1, arrival: 0, ttft: 10, e2e: 10, tokens: []float64{10}}, {slot: -1, arrival: 10, ttft: 20, e2e: 20, tokens: []float64{30}}}
	m, err := measure([][]rec{steady}, steady[:1], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.ITLP50 != 0 || m.ITLP99 != 0 || m.TPOTMean != 0 {
		t.Errorf("osl 1: itl %v/%v tpot %v, want 0", m.ITLP50, m.ITLP99, m.TPOTMean)
	}
	if m.ThroughputRPS != 1/(10.0/1000) || m.TTFTMean != 15 || m.TTFTP50 != 10 || m.TTFTP99 != 20 || m.TransMax != 10 {
		t.Errorf("metrics %+v", m)
	}
	if _, err := measure([][]rec{{{ttft: math.NaN(), e2e: 1, tokens: []float64{1}}}}, nil, 0, 0); err == nil {
		t.Error("NaN TTFT accepted")
	}
	if r := residual(1, 0); !math.IsInf(r, 1) {
		t.Errorf("residual(1, 0) = %v, want +Inf (a failure)", r)
	}
}
