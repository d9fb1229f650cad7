package disagg

import (
	"context"
	"math"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// testConfig is 1P1D on vLLM engines with linear timing: a 1000-token prompt
// prefills in one 15 ms pass, a single-row decode pass takes 3.1 ms, and its KV
// (10⁸ bytes) crosses a 10 GB/s × 0.8 link in 12.5 ms.
func testConfig(t *testing.T, nP, nD int) Config {
	t.Helper()
	e, err := engine.Defaults(engine.VLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Prefill:         Pool{Engine: e, Timing: timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01}, Workers: nP},
		Decode:          Pool{Engine: e, Timing: timing.Linear{BaseMs: 3, DecodeMsPerRow: 0.1}, Workers: nD},
		Fabric:          Fabric{InterNodeGBps: 10},
		KVBytesPerToken: 1e5,
	}
}

func eval(t *testing.T, w workload.Spec, c Config) *Report {
	t.Helper()
	r, err := Quantitative(context.Background(), w, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestIdentity1P1D: at C = 1 the TTFT is the pure prefill pass (plus stages), the
// transfer is bytes / (bandwidth × efficiency), every decode gap but the first is
// the single-row decode pass and the first gap is the handoff plus one pass.
func TestIdentity1P1D(t *testing.T) {
	c := testConfig(t, 1, 1)
	c.Prefill.Engine.StageMs = 2
	r := eval(t, workload.Spec{ISL: 1000, OSL: 10, Concurrency: 1}, c)
	if got := r.TTFTSteady.Max(); !near(got, 17) || !near(r.TTFTSteady.Min(), 17) {
		t.Errorf("TTFT %v..%v, want 15 (prefill pass) + 2 (stage)", r.TTFTSteady.Min(), got)
	}
	if got := r.KVTransfer.Mean(); !near(got, 12.5) {
		t.Errorf("transfer %v ms, want 12.5", got)
	}
	if got := r.ITL.Quantile(0.5); !near(got, 3.1) {
		t.Errorf("ITL p50 %v, want the decode pass 3.1", got)
	}
	// vLLM's decode side recomputes the last prompt token (V-D4): its first pass is
	// a one-token chunk, 3.0 ms with this timing, not a decode row.
	if got := r.ITL.Max(); !near(got, 12.5+3.0) {
		t.Errorf("ITL max %v, want handoff 12.5 + one-token pass 3.0", got)
	}
	// E2E = stage + prefill + transfer + the V-D5 pass + 8 decode passes; X = 1/(E2E).
	e2e := 2 + 15 + 12.5 + 3.0 + 8*3.1
	if got := r.E2E.Mean(); !near(got, e2e) {
		t.Errorf("E2E %v, want %v", got, e2e)
	}
	if r.MultiStable {
		t.Error("C = 1 flagged multi-stable")
	}
	c.HandoffInTTFT = true
	r = eval(t, workload.Spec{ISL: 1000, OSL: 10, Concurrency: 1}, c)
	if got := r.TTFTSteady.Mean(); !near(got, 17+12.5) {
		t.Errorf("handoff_in_ttft: TTFT %v, want 29.5", got)
	}
	if got := r.ITL.Max(); !near(got, 3.1) {
		t.Errorf("handoff_in_ttft: ITL max %v, want 3.1", got)
	}
}

// TestIdentity1P1DMTP: TensorRT-LLM one-model MTP on both pools at C = 1 (one
// draft, 0.5 accepted: the m-th decode step emits engine.StepTokens(0.5, m) =
// 1, 2, 1, 2, … tokens). The decode worker's 9 tokens take 6 steps (1 + 2 + 1
// + 2 + 1 + 2 = 9): 3 of the 9 ITL gaps are 0 (the accepted drafts, with
// their step's token), in the tandem and in the screening tier, whose TPOT
// (the first gap and 5 decode passes over 9 tokens) is the tandem's at C = 1.
func TestIdentity1P1DMTP(t *testing.T) {
	c := testConfig(t, 1, 1)
	e, err := engine.Defaults(engine.TRTLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	e.SetDrafts(1, 0.5)
	c.Prefill.Engine, c.Decode.Engine = e, e
	w := workload.Spec{ISL: 1000, OSL: 10, Concurrency: 1}
	r := eval(t, w, c)
	steps := queueing.DecodeSteps(0.5, 0, 9)
	if steps != 6 {
		t.Fatalf("DecodeSteps(0.5, 0, 9) = %d, want 6", steps)
	}
	if got, want := zeroMass(r.ITL), 3.0/9; !near(got, want) {
		t.Errorf("ITL mass at 0: %v, want %v (3 accepted drafts of 9 tokens)", got, want)
	}
	s, err := Screening(w, c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := zeroMass(s.ITL), 3.0/9; !near(got, want) {
		t.Errorf("screening ITL mass at 0: %v, want %v", got, want)
	}
	if q, sc := r.TPOT.Mean(), s.TPOT.Mean(); !near(q, sc) {
		t.Errorf("TPOT: quantitative %v, screening %v (C = 1: the same passes)", q, sc)
	}
}

// zeroMass is the share of d's weight on the value 0.
func zeroMass(d queueing.Distribution) float64 {
	z := 0.0
	for _, a := range d.Atoms() {
		if a.Value == 0 {
			z += a.Weight
		}
	}
	return z / d.TotalWeight()
}
