package queueing

import "github.com/aicdb/aicdb/engine"

// backendRules are the per-backend hooks of this package: the pass-forming rule
// of each engine the calendar (sim) calls (SCHEDULERS.md V-R*, T-R*, S-R*), the
// admission test fastForward relies on, the screening tier's chunking and alone
// prefill, and aiconfigurator's profile rule. One value per backend, chosen once when
// a sim is built (rulesFor), so the hot loop dispatches without a switch.
// Knobs that are traits of a backend (budget, seat cap, overlap, per-pass KV …)
// stay in engine.Calendar; these are the behaviours that act on the sim state.
type backendRules interface {
	// schedule builds the next pass into p (reset) from s's current state.
	schedule(s *sim, p *simPass)
	// kvQueueBlocked reports that the waiting queue provably admits nobody during
	// a decode stretch after cur (s.kv.on, a request waiting).
	kvQueueBlocked(s *sim, cur *simPass) bool
	// aicApply sets the fields aiconfigurator's benchmark rule of the backend sets
	// for in.Role on e, mbs being the rule's max_batch_size (profile.go).
	aicApply(e *engine.Spec, in ProfileInput, mbs int)
	// kvSelfHits reports that a recompute finds the victim's own blocks in the
	// prefix cache (vLLM keeps freed blocks cached; trace replay with caching).
	kvSelfHits() bool
	// kernelKV reports that a step Kernel can model a bounded KV pool for the
	// backend: vLLM's always (kv.go's block growth and preemption, V-R5, V-R6);
	// TensorRT-LLM's on a prefill hold kernel (T-R1 admission, T-D1: the tandem
	// keeps a decode worker's T-D3 reservations itself).
	kernelKV(hold bool) bool
	// holdFinished is what a hold kernel's finished request keeps of its KV until
	// the pull releases it (r.blocks, the difference back to the free blocks):
	// TensorRT-LLM's context-only request keeps the blocks it wrote, its
	// reservation's final-token block returning (T-R1, T-D1: trtKeepWritten, as
	// the overlap executor's final-token trim); vLLM's blocks are the ones it
	// wrote (lookahead slots included, V-S2) and stay.
	holdFinished(s *sim, r *simReq)
	// chunkCap is the screening tier's largest prompt chunk one request gets in a
	// pass with rows decode rows, and whether prompts are whole (screening_cycle.go).
	chunkCap(e engine.Spec, rows int) (int, bool)
	// alonePrefillMs prices a prompt alone in the engine, chunk by chunk as the
	// calendar schedules it (screening_pricer.go).
	alonePrefillMs(pr *pricer, e engine.Spec, isl, prefix int) float64
}

// vllmRules: vLLM V1's unified token-budget scheduler (V-R1…V-R10).
type vllmRules struct{}

// trtRules: TRT-LLM's capacity + micro-batch scheduler (T-R1…).
type trtRules struct{}

// sglangRules: SGLang's prefill-first scheduler with the running batch (S-R1…).
type sglangRules struct{}

// noRules schedules nothing: a sim of an unregistered backend (callers validate
// the engine first; the driver then reports errNoProgress).
type noRules struct{}

func (vllmRules) schedule(s *sim, p *simPass)   { s.scheduleVLLM(p) }
func (trtRules) schedule(s *sim, p *simPass)    { s.scheduleTRT(p) }
func (sglangRules) schedule(s *sim, p *simPass) { s.scheduleSGLang(p) }
func (noRules) schedule(*sim, *simPass)         {}

func (vllmRules) kvQueueBlocked(s *sim, cur *simPass) bool { return s.kvQueueBlockedVLLM(cur) }
func (sglangRules) kvQueueBlocked(s *sim, _ *simPass) bool { return s.kv.batchFull && s.chunked < 0 }
func (trtRules) kvQueueBlocked(*sim, *simPass) bool        { return false }
func (noRules) kvQueueBlocked(*sim, *simPass) bool         { return false }

// rulesFor returns b's scheduling rules: the registry of this package, an
// immutable table built per call (no package state), in engine.Backends order.
func rulesFor(b engine.Backend) backendRules {
	table := [...]struct {
		b engine.Backend
		r backendRules
	}{{engine.VLLM, vllmRules{}}, {engine.TRTLLM, trtRules{}}, {engine.SGLang, sglangRules{}}}
	for _, t := range table {
		if t.b == b {
			return t.r
		}
	}
	return noRules{}
}

func (vllmRules) kvSelfHits() bool   { return true }
func (trtRules) kvSelfHits() bool    { return false }
func (sglangRules) kvSelfHits() bool { return false }
func (noRules) kvSelfHits() bool     { return false }

func (vllmRules) kernelKV(bool) bool     { return true }
func (trtRules) kernelKV(hold bool) bool { return hold }
func (sglangRules) kernelKV(bool) bool   { return false }
func (noRules) kernelKV(bool) bool       { return false }

// KernelModelsKV reports that a step Kernel of backend b — a hold kernel (a
// prefill worker keeping finished prompts for their pull) when hold — models a
// bounded KV pool given KernelOptions.KVCapacityTokens (the rules' kernelKV):
// what the tandem asks before it gives a kernel its pool.
func KernelModelsKV(b engine.Backend, hold bool) bool { return rulesFor(b).kernelKV(hold) }

func (vllmRules) holdFinished(*sim, *simReq)    {}
func (trtRules) holdFinished(s *sim, r *simReq) { s.trtKeepWritten(r) }
func (sglangRules) holdFinished(*sim, *simReq)  {}
func (noRules) holdFinished(*sim, *simReq)      {}
