package oracle

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"pgregory.net/rapid"
)

// disaggTest is 1000-token prompts priced 15 ms per prefill pass, 3.1 ms single-row
// decode passes, 10⁸ bytes of KV per request over 10 GB/s × 0.8: 12.5 ms alone.
func disaggTest(nP, nD int, be engine.Backend) DisaggConfig {
	e := engine.Spec{Backend: be, BlockSize: 16, KVCapacityTokens: 4095 * 16,
		MaxNumBatchedTokens: 8192, MaxNumSeqs: 256, EnableChunkedPrefill: true,
		MaxBatchSize: 256, MaxNumTokens: 8192, CapacityPolicy: engine.PolicyGuaranteedNoEvict,
		MaxPrefillTokens: 8192, ChunkedPrefillSize: 8192}
	return DisaggConfig{
		Prefill:         DisaggPool{Engine: e, Timing: timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01}, Workers: nP},
		Decode:          DisaggPool{Engine: e, Timing: timing.Linear{BaseMs: 3, DecodeMsPerRow: 0.1}, Workers: nD},
		Fabric:          DisaggFabric{InterNodeGBps: 10},
		KVBytesPerToken: 1e5,
	}
}

func runDisagg(t *testing.T, c DisaggConfig, cl ClosedLoop) *DisaggResult {
	t.Helper()
	d, err := NewDisagg(c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.RunClosedLoop(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func nearMs(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestDisaggFabricMaxMin: a flow alone gets the whole port; two flows into one
// ingress port (fan-in) get half each; a third flow sharing an egress port with
// one of them (fan-out) takes a max-min share; completions come in start order.
func TestDisaggFabricMaxMin(t *testing.T) {
	f := kvFabric{ports: []float64{8, 8, 8, 8}} // egress 0, 1; ingress 2, 3
	f.start(0, 0, 0, 2, 80)
	if r := f.rate(0); r != 8 {
		t.Fatalf("alone: rate %v, want 8", r)
	}
	f.start(0, 1, 1, 2, 80)
	if a, b := f.rate(0), f.rate(1); a != 4 || b != 4 {
		t.Fatalf("fan-in: rates %v, %v, want 4, 4 (half the ingress each)", a, b)
	}
	f.start(10, 2, 0, 3, 80)
	if a, b, c := f.rate(0), f.rate(1), f.rate(2); a != 4 || b != 4 || c != 4 {
		t.Fatalf("fan-out: rates %v, %v, %v, want 4, 4, 4", a, b, c)
	}
	if n := f.next(); n != 20 {
		t.Fatalf("next completion %v, want 20", n)
	}
	done := f.complete(20, nil)
	if !reflect.DeepEqual(done, []int32{0, 1}) {
		t.Fatalf("done at 20: %v, want [0 1]", done)
	}
	if r, n := f.rate(2), f.next(); r != 8 || n != 25 {
		t.Fatalf("after: rate %v, next %v; want 8 and 25 (40 bytes left alone at 8)", r, n)
	}
}

// TestDisaggFabricSimultaneousLate: two equal flows started together on a shared
// port finish at one instant in exact arithmetic and must land in one fabric event
// however late the clock — the instants of the staggered run of
// TestPropertyDisaggVLLMKVAgainstDES seed 17758923222677377331, where ulp(t) ≈
// 7.3e-12 ms and the drain left the second flow 2.3e-6 bytes (2.9e-12 ms):
// above a fixed femtosecond, so it landed in a second event at the same t, after
// the prefill worker had scheduled on the first release alone.
func TestDisaggFabricSimultaneousLate(t *testing.T) {
	f := kvFabric{ports: []float64{1.6e6, 1.6e6}} // 2 GB/s × 0.8, bytes per ms
	t0 := 33071.460929999921
	f.start(t0, 0, 0, 1, 16*1.6e5)
	f.start(t0, 1, 0, 1, 16*1.6e5)
	n := f.next()
	if !nearMs(n, t0+3.2) {
		t.Fatalf("next completion %v, want %v", n, t0+3.2)
	}
	if done := f.complete(n, nil); !reflect.DeepEqual(done, []int32{0, 1}) {
		t.Fatalf("done at %v: %v, want [0 1] (one event)", n, done)
	}
	if n := f.next(); !math.IsInf(n, 1) {
		t.Fatalf("a flow is left: next %v", n)
	}
}

// TestDisaggFabricSimultaneousDrifted: flows that finish together in exact
// arithmetic land in one fabric event even when the event times carry float drift
// far above the drain's rounding — the instants of TestPropertyDisaggVLLMKVAgainstDES
// seed 13932306038080048875 (flows 126–128): A on ports 0→2 starts at 1445.82119,
// B on 1→3 at 1445.82120, C on 0→2 at 1458.42118 (each 12.6 ms alone), so A and B
// both finish at 1458.4212; the drifted starts leave A 0.0045 bytes (5.6e-9 ms)
// when B lands. The tandem (disagg/fabric.go, pop: under a nanosecond) lands both;
// the former 1e-12·t window (1.5e-9 ms) landed A in a second event 5.6e-9 ms later.
func TestDisaggFabricSimultaneousDrifted(t *testing.T) {
	f := kvFabric{ports: []float64{1.6e6, 1.6e6, 1.6e6, 1.6e6}}
	f.start(1445.8211900016031, 0, 0, 2, 20160000)
	f.start(1445.8211999979794, 1, 1, 3, 20160000)
	f.start(1458.4211799995828, 2, 0, 2, 20160000)
	n := f.next()
	if n != 1458.4211999979793 {
		t.Fatalf("next completion %v, want 1458.4211999979793 (B)", n)
	}
	if done := f.complete(n, nil); !reflect.DeepEqual(done, []int32{0, 1}) {
		t.Fatalf("done at %v: %v, want [0 1] (one event)", n, done)
	}
}

// TestDisaggIdentity1P1D: at C = 1 (TRT-LLM, no recompute on the decode side,
// T-D4) TTFT is the prefill pass, the transfer bytes/(bandwidth × efficiency),
// every decode gap the single-row pass and the first gap handoff + pass; with
// handoff_in_ttft the transfer moves into the TTFT.
func TestDisaggIdentity1P1D(t *testing.T) {
	c := disaggTest(1, 1, engine.TRTLLM)
	res := runDisagg(t, c, ClosedLoop{Shape: Shape{ISL: 1000, OSL: 10}, Clients: 1, Generations: 3})
	for _, r := range res.Requests {
		tt, x := r.VisibleMs-r.ArrivalMs, r.XferEndMs-r.XferStartMs
		if !nearMs(tt, 15) || !nearMs(x, 12.5) || !nearMs(r.FinishMs-r.ArrivalMs, 15+12.5+9*3.1) {
			t.Fatalf("request %d: TTFT %v, transfer %v, E2E %v; want 15, 12.5, %v", r.Generation, tt, x, r.FinishMs-r.ArrivalMs, 15+12.5+9*3.1)
		}
		if len(r.TokenTimesMs) != 10 || !nearMs(r.TokenTimesMs[1]-r.TokenTimesMs[0], 12.5+3.1) || !nearMs(r.TokenTimesMs[2]-r.TokenTimesMs[1], 3.1) {
			t.Fatalf("request %d: token times %v; want 10 tokens, first gap 15.6, then 3.1", r.Generation, r.TokenTimesMs)
		}
	}
	c.HandoffInTTFT = true
	res = runDisagg(t, c, ClosedLoop{Shape: Shape{ISL: 1000, OSL: 10}, Clients: 1, Generations: 1})
	if r := res.Requests[0]; !nearMs(r.VisibleMs-r.ArrivalMs, 27.5) || !nearMs(r.TokenTimesMs[1]-r.TokenTimesMs[0], 3.1) {
		t.Fatalf("handoff in TTFT: TTFT %v, first gap %v; want 27.5, 3.1", r.VisibleMs-r.ArrivalMs, r.TokenTimesMs[1]-r.TokenTimesMs[0])
	}
}

// TestDisaggVLLMRecompute: vLLM's decode side recomputes the last prompt token
// (V-D4): its first pass is a one-token chunk (3.0 ms here, no decode row) and it
// emits osl − 1 tokens after the prefill worker's first.
func TestDisaggVLLMRecompute(t *testing.T) {
	res := runDisagg(t, disaggTest(1, 1, engine.VLLM), ClosedLoop{Shape: Shape{ISL: 1000, OSL: 10}, Clients: 1, Generations: 1})
	r := res.Requests[0]
	if len(r.TokenTimesMs) != 10 || !nearMs(r.TokenTimesMs[1]-r.TokenTimesMs[0], 12.5+3.0) || !nearMs(r.FinishMs, 15+12.5+3.0+8*3.1) {
		t.Fatalf("token times %v, finish %v; want 10 tokens, first gap 15.5, finish %v", r.TokenTimesMs, r.FinishMs, 15+12.5+3.0+8*3.1)
	}
}

// TestDisaggFanInHalves: two prompts completing together on two prefill workers
// fan into one decode NIC: each transfer takes twice as long (25 ms); with two
// decode workers they do not share (12.5 ms).
func TestDisaggFanInHalves(t *testing.T) {
	cl := ClosedLoop{Shape: Shape{ISL: 1000, OSL: 10}, Clients: 2, Generations: 1}
	for _, tc := range []struct {
		nD   int
		want float64
	}{{1, 25}, {2, 12.5}} {
		res := runDisagg(t, disaggTest(2, tc.nD, engine.TRTLLM), cl)
		for _, r := range res.Requests {
			if x := r.XferEndMs - r.XferStartMs; !nearMs(x, tc.want) {
				t.Fatalf("2P%dD: transfer %v ms, want %v", tc.nD, x, tc.want)
			}
		}
	}
}

// TestDisaggKappaOneSerialises: with κ = 1 a prefill worker takes its next prompt
// only when the previous one was pulled: consecutive prefill starts on a worker
// are at least prefill pass + transfer apart (15 + 12.5 ms).
func TestDisaggKappaOneSerialises(t *testing.T) {
	c := disaggTest(1, 1, engine.TRTLLM)
	c.Prefill.InFlightCap = 1
	res := runDisagg(t, c, ClosedLoop{Shape: Shape{ISL: 1000, OSL: 4}, Clients: 8, Generations: 4})
	last := math.Inf(-1)
	for _, r := range res.Requests {
		if r.PrefillStartMs < last+27.5-1e-9 {
			t.Fatalf("prefill start %v only %v ms after the previous: κ = 1 must serialise prefill + transfer (27.5 ms)", r.PrefillStartMs, r.PrefillStartMs-last)
		}
		last = r.PrefillStartMs
	}
	c.Prefill.InFlightCap = 0
	res = runDisagg(t, c, ClosedLoop{Shape: Shape{ISL: 1000, OSL: 4}, Clients: 8, Generations: 4})
	if r := res.Requests[1]; r.PrefillStartMs != 0 {
		t.Fatalf("no κ: the second prompt starts at %v, want 0 (batched with the first)", r.PrefillStartMs)
	}
}

// TestDisaggHeadroomZeroSerialises: a decode KV that holds exactly one request
// (TRT-LLM reserves to completion, T-D3) admits one pull at a time: transfers never
// overlap, each takes 12.5 ms, and the headroom seen reaches 0.
func TestDisaggHeadroomZeroSerialises(t *testing.T) {
	c := disaggTest(2, 1, engine.TRTLLM)
	c.Decode.Engine.SetGPUBlocks((1000+8)/16 + 1) // 63 blocks = one request of 1000 + 8
	res := runDisagg(t, c, ClosedLoop{Shape: Shape{ISL: 1000, OSL: 8}, Clients: 4, Generations: 3})
	minH, end := 1.0, math.Inf(-1)
	for _, r := range sortedByXfer(res.Requests) {
		if x := r.XferEndMs - r.XferStartMs; !nearMs(x, 12.5) || r.XferStartMs < end-1e-9 {
			t.Fatalf("transfer %v..%v (%v ms) overlaps the previous ending %v: want serialised 12.5 ms transfers", r.XferStartMs, r.XferEndMs, x, end)
		}
		end = r.XferEndMs
		minH = math.Min(minH, r.Headroom)
	}
	if minH != 0 {
		t.Fatalf("headroom min %v, want 0", minH)
	}
}

func sortedByXfer(rs []DisaggRecord) []DisaggRecord {
	out := append([]DisaggRecord(nil), rs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].XferStartMs < out[j-1].XferStartMs; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestDisaggPushFreesSlot: a push connector frees the κ slot when it sends, so κ
// = 1 serialises the prefill passes only (starts 15 ms apart, not 27.5).
func TestDisaggPushFreesSlot(t *testing.T) {
	c := disaggTest(1, 1, engine.TRTLLM)
	c.Prefill.InFlightCap, c.Push = 1, true
	res := runDisagg(t, c, ClosedLoop{Shape: Shape{ISL: 1000, OSL: 4}, Clients: 4, Generations: 1})
	for i := 1; i < len(res.Requests); i++ {
		if d := res.Requests[i].PrefillStartMs - res.Requests[i-1].PrefillStartMs; !nearMs(d, 15) {
			t.Fatalf("push κ=1: prefill starts %v ms apart, want 15", d)
		}
	}
}

// TestDisaggDeterministic: the same inputs give bit-identical records.
func TestDisaggDeterministic(t *testing.T) {
	c := disaggTest(2, 1, engine.VLLM)
	c.Prefill.InFlightCap = 2
	c.Decode.Engine.SetGPUBlocks(8 * 70)
	cl := ClosedLoop{Shape: Shape{ISL: 1000, OSL: 64}, Clients: 16, Generations: 6, KeepBusy: true, StartMs: make([]float64, 16)}
	for i := range cl.StartMs {
		cl.StartMs[i] = float64(i) * 13.7
	}
	a, b := runDisagg(t, c, cl), runDisagg(t, c, cl)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same deployment differ")
	}
}

// TestDisaggErrors: bad input is a one-line error naming the field.
func TestDisaggErrors(t *testing.T) {
	for _, tc := range []struct {
		mut  func(c *DisaggConfig)
		want string
	}{
		{func(c *DisaggConfig) { c.Prefill.Workers = 0 }, "disagg prefill workers = 0: must be in 1..1024"},
		{func(c *DisaggConfig) { c.Fabric.InterNodeGBps = 0 }, "disagg fabric inter_node_gbps = 0: must be a finite number > 0"},
		{func(c *DisaggConfig) { c.KVBytesPerToken = math.NaN() }, "disagg fabric kv_bytes_per_token = NaN: must be a finite number > 0"},
		{func(c *DisaggConfig) { c.Decode.InFlightCap = 2 }, "disagg decode in_flight_cap = 2: κ applies to the prefill pool only"},
		{func(c *DisaggConfig) { c.Fabric.Efficiency = 1.5 }, "disagg fabric efficiency = 1.5: must be in (0, 1] (0 selects 0.8)"},
	} {
		c := disaggTest(1, 1, engine.VLLM)
		tc.mut(&c)
		if _, err := NewDisagg(c); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	c := disaggTest(1, 1, engine.TRTLLM)
	c.Decode.Engine.SetGPUBlocks(10)
	d, err := NewDisagg(c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.RunClosedLoop(context.Background(), ClosedLoop{Shape: Shape{ISL: 1000, OSL: 10}, Clients: 1, Generations: 1})
	if want := "disagg decode num_gpu_blocks = 10: one request of isl 1000 + osl 10 needs 64 blocks of 16 tokens; give the decode pool more KV"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// TestDisaggPropertyInvariants: over random small deployments every request
// passes its stages in order (arrival ≤ first prefill pass ≤ first token ≤ transfer
// start ≤ transfer end ≤ finish), emits exactly osl client-visible tokens in time
// order, and no decode worker's pulls overlap more requests than its KV holds.
func TestDisaggPropertyInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		be := rapid.SampledFrom([]engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang}).Draw(rt, "backend")
		c := disaggTest(rapid.IntRange(1, 3).Draw(rt, "nP"), rapid.IntRange(1, 3).Draw(rt, "nD"), be)
		c.Prefill.InFlightCap = rapid.IntRange(0, 4).Draw(rt, "kappa")
		c.Push = rapid.Bool().Draw(rt, "push")
		c.HandoffInTTFT = rapid.Bool().Draw(rt, "handoff")
		c.Fabric.InterNodeGBps = rapid.Float64Range(1, 100).Draw(rt, "gbps")
		isl, osl := rapid.IntRange(16, 1500).Draw(rt, "isl"), rapid.IntRange(1, 40).Draw(rt, "osl")
		C := rapid.IntRange(1, 12).Draw(rt, "C")
		kvReqs := rapid.IntRange(1, 6).Draw(rt, "kvReqs")
		if be != engine.TRTLLM {
			// vLLM and SGLang reserve the prompt only and may preempt under decode KV
			// pressure; a preempted request at the waiting head can then block a
			// pulled one holding its blocks (the engines' own livelock): hold C.
			kvReqs = C
		}
		c.Decode.Engine.SetGPUBlocks(kvReqs*((isl+osl+15)/16+1) + 1)
		d, err := NewDisagg(c)
		if err != nil {
			rt.Fatal(err)
		}
		res, err := d.RunClosedLoop(context.Background(), ClosedLoop{Shape: Shape{ISL: isl, OSL: osl}, Clients: C, Generations: 3})
		if err != nil {
			rt.Fatal(err)
		}
		for _, r := range res.Requests {
			if !r.Done {
				continue
			}
			seq := []float64{r.ArrivalMs, r.PrefillStartMs, r.FirstTokenMs, r.XferStartMs, r.XferEndMs, r.FinishMs}
			for i := 1; i < len(seq); i++ {
				if seq[i] < seq[i-1] {
					rt.Fatalf("request %d/%d: stage times %v out of order", r.Client, r.Generation, seq)
				}
			}
			if len(r.TokenTimesMs) != osl {
				rt.Fatalf("request %d/%d: %d tokens, want %d", r.Client, r.Generation, len(r.TokenTimesMs), osl)
			}
			if (r.DecodeWorker < 0) != (osl <= 1) { // a one-token output has no handoff (an S-D2 slot is returned)
				rt.Fatalf("request %d/%d: decode worker %d with osl %d", r.Client, r.Generation, r.DecodeWorker, osl)
			}
			for i := 1; i < len(r.TokenTimesMs); i++ {
				if r.TokenTimesMs[i] < r.TokenTimesMs[i-1] {
					rt.Fatalf("request %d/%d: token times %v not ordered", r.Client, r.Generation, r.TokenTimesMs)
				}
			}
		}
	})
}

// TestDisaggHeldKVBlocksPrefill: the prefill worker keeps a finished prompt's KV
// until it is pulled (V-P3, T-D1); with a prefill pool of one prompt the next
// prompt starts only when the previous transfer ended (the engine waits for the
// release instead of reporting a stuck run).
func TestDisaggHeldKVBlocksPrefill(t *testing.T) {
	for _, be := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		c := disaggTest(1, 1, be)
		c.Prefill.Engine.SetGPUBlocks(64 + 2) // 1000 + 1 tokens: 63 blocks usable for one prompt
		res := runDisagg(t, c, ClosedLoop{Shape: Shape{ISL: 1000, OSL: 4}, Clients: 2, Generations: 2})
		prev := res.Requests[0]
		for _, r := range res.Requests[1:] {
			if r.PrefillStartMs < prev.XferEndMs {
				t.Fatalf("%s: prefill start %v before the previous prompt's KV was pulled at %v", be, r.PrefillStartMs, prev.XferEndMs)
			}
			prev = r
		}
	}
}
