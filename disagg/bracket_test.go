package disagg

import (
	"context"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// drawBracketCase draws a random closed-loop tandem: backend and its prefill knobs
// (chunking, budget, vLLM threshold, async), κ and batch caps, decode KV and
// batch, NIC and NVLink placement, pull or push, handoff_in_ttft, linear or
// roofline timing per pool, turnaround and stage time, MTP drafts.
func drawBracketCase(rt *rapid.T) (workload.Spec, Config) {
	be := rapid.SampledFrom([]engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang}).Draw(rt, "backend")
	e, err := engine.Defaults(be, "")
	if err != nil {
		rt.Fatal(err)
	}
	e.AsyncScheduling = e.AsyncScheduling && rapid.Bool().Draw(rt, "async")
	e.StageMs = float64(rapid.IntRange(0, 3).Draw(rt, "stage"))
	e.EnableChunkedPrefill = rapid.Bool().Draw(rt, "chunked")
	budget := rapid.SampledFrom([]int{512, 2048, 8192}).Draw(rt, "budget")
	switch be {
	case engine.VLLM:
		e.MaxNumBatchedTokens = budget
		if rapid.Bool().Draw(rt, "threshold") {
			e.LongPrefillTokenThreshold = rapid.IntRange(64, 2048).Draw(rt, "thr")
		}
	case engine.TRTLLM:
		e.MaxNumTokens = budget
	case engine.SGLang:
		e.ChunkedPrefillSize = budget
		e.MaxPrefillTokens = rapid.SampledFrom([]int{budget, 2 * budget}).Draw(rt, "maxprefill")
	}
	isl := rapid.IntRange(32, 3000).Draw(rt, "isl")
	osl := rapid.IntRange(1, 24).Draw(rt, "osl")
	tm := func(name string) timing.Timing {
		if rapid.Bool().Draw(rt, name+"roofline") {
			return timing.Roofline{BaseMs: rapid.Float64Range(0.5, 5).Draw(rt, name+"base"), WeightsMs: rapid.Float64Range(0, 10).Draw(rt, name+"w"),
				TokenMs: 0.004, AttnMsPerPair: rapid.Float64Range(0, 1e-6).Draw(rt, name+"attn"), KVMsPerToken: 2e-5}
		}
		return timing.Linear{BaseMs: rapid.Float64Range(1, 30).Draw(rt, name+"base"), PrefillMsPerToken: rapid.Float64Range(0, 0.02).Draw(rt, name+"tok"),
			DecodeMsPerRow: rapid.Float64Range(0, 0.3).Draw(rt, name+"row"), CtxMsPerToken: rapid.Float64Range(0, 1e-4).Draw(rt, name+"ctx")}
	}
	c := Config{
		Prefill: Pool{Engine: e, Timing: tm("p"), Workers: rapid.IntRange(1, 3).Draw(rt, "nP"),
			InFlightCap: rapid.IntRange(0, 4).Draw(rt, "kappa"), BatchCap: rapid.IntRange(0, 6).Draw(rt, "pcap"),
			GPUsPerWorker: rapid.IntRange(1, 4).Draw(rt, "pgpus")},
		Decode: Pool{Engine: e, Timing: tm("d"), Workers: rapid.IntRange(1, 3).Draw(rt, "nD"),
			BatchCap: rapid.IntRange(0, 8).Draw(rt, "dcap"), GPUsPerWorker: rapid.IntRange(1, 4).Draw(rt, "dgpus")},
		Fabric:          Fabric{InterNodeGBps: rapid.Float64Range(0.5, 50).Draw(rt, "bw")},
		KVBytesPerToken: rapid.Float64Range(1e4, 3e5).Draw(rt, "kvb"),
		Push:            rapid.Bool().Draw(rt, "push"),
		HandoffInTTFT:   rapid.Bool().Draw(rt, "handoff"),
	}
	if rapid.Bool().Draw(rt, "nvlink") {
		c.Fabric.IntraNodeGBps = rapid.Float64Range(50, 500).Draw(rt, "nvbw")
		c.Fabric.GPUsPerNode = 8
	}
	if n := rapid.IntRange(0, 6).Draw(rt, "kvreq"); n > 0 {
		c.Decode.KVCapacityTokens = n*(isl+osl) + rapid.IntRange(0, isl).Draw(rt, "kvslack")
	}
	w := workload.Spec{ISL: isl, OSL: osl, Concurrency: rapid.IntRange(1, 12).Draw(rt, "C"),
		TurnaroundMs: float64(rapid.IntRange(0, 2).Draw(rt, "turn"))}
	c.Decode.KVCapacityTokens = deadlockFreeKV(e, c.Decode.KVCapacityTokens, isl, osl, w.Concurrency)
	// MTP on both pools (TensorRT-LLM one-model MTP, SGLang EAGLE) for a third of
	// the TensorRT-LLM and SGLang draws.
	if be != engine.VLLM && rapid.IntRange(0, 2).Draw(rt, "mtp") == 0 {
		k := rapid.IntRange(1, 3).Draw(rt, "drafts")
		a := rapid.Float64Range(0, float64(k)).Draw(rt, "accepted")
		c.Prefill.Engine.SetDrafts(k, a)
		c.Decode.Engine.SetDrafts(k, a)
	}
	return w, c
}

// TestPropertyScreeningBracket: over random closed-loop tandems the screening
// bracket holds on both sides against the quantitative tier — lo ≤ every steady
// TTFT, and where the row is declared certain, every steady TTFT (so its p99) ≤
// hi — and certainty is the rule in a closed loop (a whole prompt that does not
// fit the prefill budget is the only exception drawn here).
func TestPropertyScreeningBracket(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, c := drawBracketCase(rt)
		_, _, fits := progress(c.Prefill.Engine, w.ISL)
		q, err := Quantitative(context.Background(), w, c, Options{WindowGenerations: 4})
		if err != nil {
			if !fits { // a whole prompt over the budget never schedules (V-R3, T-R3)
				return
			}
			rt.Fatal(err)
		}
		s, err := Screening(w, c)
		if err != nil {
			rt.Fatal(err)
		}
		if lo, m := s.TTFTSteadyP99Lo, q.TTFTSteady.Min(); lo > m*(1+1e-9) {
			rt.Fatalf("screening lo %v > tandem min TTFT %v", lo, m)
		}
		if s.TTFTSteadyP99Lo > s.TTFTSteadyP99Hi {
			rt.Fatalf("lo %v > hi %v", s.TTFTSteadyP99Lo, s.TTFTSteadyP99Hi)
		}
		want := fits && !vllmDecodeMayPreempt(c, w)
		if want != s.Diagnostics.BracketCertain {
			rt.Fatalf("bracket certain %v, want %v (the prompt fits the prefill budget: %v)", s.Diagnostics.BracketCertain, want, fits)
		}
		if !s.Diagnostics.BracketCertain {
			return
		}
		if hi, m := s.TTFTSteadyP99Hi, q.TTFTSteady.Max(); m > hi*(1+1e-9) {
			rt.Fatalf("certain hi %v < tandem max steady TTFT %v (p99 %v)", hi, m, q.TTFTSteady.Quantile(0.99))
		}
	})
}

// TestScreeningOpenLoopNotCertain: an open loop has no client bound on the
// requests ahead, so its hi stays an estimate.
func TestScreeningOpenLoopNotCertain(t *testing.T) {
	e, err := engine.Defaults(engine.VLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.1}
	c := Config{Prefill: Pool{Engine: e, Timing: tm, Workers: 1}, Decode: Pool{Engine: e, Timing: tm, Workers: 1},
		Fabric: Fabric{InterNodeGBps: 10}, KVBytesPerToken: 1e5}
	for _, w := range []workload.Spec{{ISL: 1000, OSL: 10, RateRPS: 5}, {ISL: 1000, OSL: 10, Concurrency: 4}} {
		s, err := Screening(w, c)
		if err != nil {
			t.Fatal(err)
		}
		if want := w.Concurrency > 0; s.Diagnostics.BracketCertain != want {
			t.Errorf("%+v: bracket certain %v, want %v", w, s.Diagnostics.BracketCertain, want)
		}
	}
}

// TestScreeningBracketVLLMDecodeBlocks: the rapid case (seed 13283697488503617034)
// where vLLM's decode KV of 216 tokens holds six requests' isl + osl = 36 tokens
// but only four in whole 16-token blocks (13 blocks, a request grows to 3): the
// tandem's pulls wait a decode residence (V-D2) and its worst steady TTFT is
// 17.26 ms, above the 16.43 ms hi that counted the KV in tokens. Since stop 22 the
// bracket is not certain there at all — six requests can outgrow 13 blocks and
// preempt (V-R6), which ttftHi does not bound — so its hi is the estimate's p99
// and claims nothing about the tandem's 17.26 ms.
func TestScreeningBracketVLLMDecodeBlocks(t *testing.T) {
	e, err := engine.Defaults(engine.VLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	e.AsyncScheduling, e.StageMs, e.EnableChunkedPrefill, e.MaxNumBatchedTokens = false, 0, false, 512
	c := Config{
		Prefill: Pool{Engine: e, Timing: timing.Roofline{BaseMs: 1, WeightsMs: 1, TokenMs: 0.004, AttnMsPerPair: 1e-6, KVMsPerToken: 2e-5},
			Workers: 1, GPUsPerWorker: 1},
		Decode: Pool{Engine: e, Timing: timing.Linear{BaseMs: 7.5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.3, CtxMsPerToken: 1e-4},
			Workers: 1, GPUsPerWorker: 1, KVCapacityTokens: 6 * 36},
		Fabric: Fabric{InterNodeGBps: 1}, KVBytesPerToken: 1e4, HandoffInTTFT: true,
	}
	w := workload.Spec{ISL: 32, OSL: 4, Concurrency: 6}
	q, err := Quantitative(context.Background(), w, c, Options{WindowGenerations: 4})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Screening(w, c)
	if err != nil {
		t.Fatal(err)
	}
	if s.Diagnostics.BracketCertain {
		t.Fatal("bracket certain, want an estimate (the decodes can preempt, V-R6)")
	}
	if m := q.TTFTSteady.Max(); !near(m, 17.2601) {
		t.Fatalf("tandem max steady TTFT %v, want 17.2601 (the pinned case)", m)
	}
}

// vllmDecodeMayPreempt reports whether c's vLLM decode pool cannot hold the C
// requests at full length at once (isl + osl − 2 tokens in whole blocks, V-D4),
// so that decodes can preempt by recompute (V-R6): ttftHi does not bound that.
func vllmDecodeMayPreempt(c Config, w workload.Spec) bool {
	kv := c.Decode.KVCapacityTokens
	if c.Push || kv <= 0 || w.OSL <= 1 || c.Decode.Engine.Backend != engine.VLLM { // osl 1: no decode
		return false
	}
	bs := max(c.Decode.Engine.BlockSize, 1)
	q := max((w.ISL+w.OSL-2+bs-1)/bs, (w.ISL+bs-1)/bs)
	return (kv/bs)/q < w.Concurrency
}

// TestScreeningVLLMDecodePreemptionNotCertain: a vLLM decode pool that cannot
// hold every request at full length may preempt by recompute (V-R6), which
// ttftHi does not bound: the bracket is an estimate there; with room for all of
// them it is certain.
func TestScreeningVLLMDecodePreemptionNotCertain(t *testing.T) {
	c := testConfig(t, 1, 1)
	w := workload.Spec{ISL: 1000, OSL: 24, Concurrency: 4}
	bs := c.Decode.Engine.BlockSize
	q := (1000 + 24 - 2 + bs - 1) / bs
	for _, k := range []struct {
		blocks  int
		certain bool
	}{{4 * q, true}, {4*q - 1, false}} {
		c.Decode.KVCapacityTokens = k.blocks * bs
		s, err := Screening(w, c)
		if err != nil {
			t.Fatal(err)
		}
		if s.Diagnostics.BracketCertain != k.certain {
			t.Errorf("decode pool of %d blocks (%d per request at full length, C 4): certain %v, want %v", k.blocks, q, s.Diagnostics.BracketCertain, k.certain)
		}
	}
}
