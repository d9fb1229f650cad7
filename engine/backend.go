package engine

import (
	"fmt"
	"strings"
)

// Backend names a serving engine whose scheduler the calendars and the oracle
// model; it is the value of Spec.Backend (JSON "backend"). Its behaviour is its
// Calendar in the registry.
type Backend string

// The registered backends.
const (
	VLLM   Backend = "vllm"
	TRTLLM Backend = "trtllm"
	SGLang Backend = "sglang"
)

// Calendar is one backend's scheduler configuration rules: its defaults, its knob
// checks, the per-pass token budget, the running-set cap and the scheduling
// traits the queueing model and the oracle dispatch on.
type Calendar interface {
	// Name is the backend's registered name.
	Name() Backend
	// Defaults are the backend's scheduler defaults at version (SCHEDULERS.md §6);
	// a malformed version is an error.
	Defaults(version string) (Spec, error)
	// Validate reports the first knob of s the backend cannot run with, naming it.
	Validate(s Spec) error
	// TokenBudget is the per-pass token budget under s.
	TokenBudget(s Spec) int
	// SeatCap is the cap on requests in the running set under s.
	SeatCap(s Spec) int
	// Traits are the backend's scheduling properties under s.
	Traits(s Spec) Traits
	// SetTokenBudget sets the knob(s) that make n the per-pass token budget.
	SetTokenBudget(s *Spec, n int)
	// SetSeatCap sets the knob that caps the running set at n.
	SetSeatCap(s *Spec, n int)
}

// Traits are the scheduling properties that differ between backends, read by the
// queueing model, the oracle and the screening bounds instead of the backend name.
type Traits struct {
	// Overlap: AsyncScheduling is honoured — pass k+1 is scheduled before pass k's
	// outputs are processed (vLLM V-R10, the TRT-LLM overlap executor §4.2, the
	// SGLang overlap scheduler §3.2).
	Overlap bool
	// Alternating: prefill passes carry no decode rows (SGLang without
	// enable_mixed_chunk, S-R4).
	Alternating bool
	// PerPassKV: KV is allocated pass by pass and a full pool preempts, retracts
	// or pauses (vLLM V-R6, SGLang S-R5, TRT-LLM MAX_UTILIZATION T-R2); false when
	// a request's whole KV is reserved at admission (TRT-LLM GUARANTEED_NO_EVICT,
	// T-R1).
	PerPassKV bool
	// AdmissionReservesKV: admission reserves a request's whole KV (prompt +
	// output) up front (TRT-LLM GUARANTEED_NO_EVICT, T-R1).
	AdmissionReservesKV bool
	// ThresholdChunks: long_prefill_token_threshold caps a request's chunk
	// (vLLM V-R2/V-R3).
	ThresholdChunks bool
	// SharedBudget: prompts share the per-pass token budget (TokenBudget) with
	// the decode rows (vLLM V-R1, TRT-LLM T-R3); SGLang's prompt budget is its own
	// (S-R4: decode rows count against it only under enable_mixed_chunk).
	SharedBudget bool
	// BudgetsCachedPrefix: a prompt is charged against the budget from position 0,
	// cached prefix included (TRT-LLM reuses blocks after budgeting, T-R3).
	BudgetsCachedPrefix bool
	// BlockAlignedChunks: a cut prompt chunk is rounded down to whole KV blocks
	// (TRT-LLM T-R3, SGLang pages S-R4); vLLM cuts at any token (V-R3).
	BlockAlignedChunks bool
	// DecodeRecomputesFirstToken: in disaggregated serving the decode side takes a
	// pulled prompt as computed up to its last token, recomputes that token and
	// samples the first output token itself (vLLM V-D4/V-D5); otherwise the
	// prefill worker's first token travels with the KV (TRT-LLM T-D4).
	DecodeRecomputesFirstToken bool
	// RatioAdmission: admission reserves the prompt plus the clipped output scaled
	// by new_token_ratio, which decays per decode step and resets on retraction
	// (SGLang S-R4/S-R5).
	RatioAdmission bool
	// FinishedRunsAgain: with Overlap, a request whose final token pass k samples
	// is still in pass k+1, which computes one more token for it and discards it
	// (the SGLang overlap scheduler, §3.2); vLLM and TRT-LLM anticipate the length
	// stop and schedule it no more (V-R12).
	FinishedRunsAgain bool
	// FinalFreesSeat: with Overlap, a running request whose final token is in
	// flight is skipped before the running cap is counted, so its seat takes a
	// waiting request in the same schedule (TRT-LLM's noScheduleAfterState,
	// GENERATION_TO_COMPLETE, T-R1); vLLM and SGLang keep it running until its
	// outputs are processed (V-R12, §3.2).
	FinalFreesSeat bool
	// PrefillBuffersPerSeat: a disaggregated prefill server admits a request
	// into its waiting queue only with a free handoff buffer and returns it when
	// the request's KV send completes; it has this many buffers per running slot
	// (SGLang's metadata buffers, 2 × max_running_requests, S-D1). 0: the engine
	// has no such cap (vLLM, TensorRT-LLM).
	PrefillBuffersPerSeat int
	// FirstTokenFromDecode: in disaggregated serving the client receives the
	// first token from the decode server, when the landed request joins the
	// decode running batch, i.e. at the start of its first decode pass (SGLang's
	// prebuilt batch, S-D4); otherwise the prefill worker's first token reaches
	// the client when it is sampled (vLLM V-P2, TensorRT-LLM T-D1).
	FirstTokenFromDecode bool
	// DecodePreallocates: in disaggregated serving the decode server takes a
	// request's slot and its prompt's KV when the request arrives, FIFO and
	// head-of-line, and the prefill server admits the request only then; the
	// slot is held until the request finishes (SGLang's DecodePreallocQueue,
	// S-D2). Otherwise the decode side reserves when the prompt completes (the
	// pull, V-D2, T-D3).
	DecodePreallocates bool
}

// DecodeSlots returns the requests one disaggregated decode worker of engine s
// with running cap seats holds from its preallocation to its finish: SGLang's
// DecodeReqToTokenPool, seats + a pre-allocation reserve of 2 × seats when seats
// ≤ 32 (S-D2). 0 when the engine does not preallocate.
func DecodeSlots(s Spec, seats int) int {
	if !s.Traits().DecodePreallocates {
		return 0
	}
	if seats <= 32 {
		return 3 * seats
	}
	return seats
}

// PrefillInFlightCap returns κ of a disaggregated prefill worker of engine s
// whose running cap is seats: the deployment's cap (0 = none) lowered to the
// engine's own handoff buffers (Traits.PrefillBuffersPerSeat × seats, S-D1).
// 0 means no cap.
func PrefillInFlightCap(s Spec, seats, deployed int) int {
	if n := s.Traits().PrefillBuffersPerSeat * seats; n > 0 && (deployed <= 0 || n < deployed) {
		return n
	}
	return deployed
}

// calendars is the registry in its fixed order (the order of Backends and of
// every "use …" hint).
func calendars() [3]Calendar { return [3]Calendar{vllm{}, trtllm{}, sglang{}} }

// Calendar returns b's registered calendar; false when b is not registered.
func (b Backend) Calendar() (Calendar, bool) {
	for _, c := range calendars() {
		if c.Name() == b {
			return c, true
		}
	}
	return nil, false
}

// Backends lists the registered backends in a fixed order (vllm, trtllm,
// sglang), for help texts and flag validation.
func Backends() []Backend {
	cs := calendars()
	out := make([]Backend, len(cs))
	for i, c := range cs {
		out[i] = c.Name()
	}
	return out
}

// List joins the registered backends' names in their fixed order, the last two
// with last: List(", ", " or ") is "vllm, trtllm or sglang", for help texts and
// "use …" hints.
func List(sep, last string) string {
	bs := Backends()
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = string(b)
	}
	return strings.Join(names[:len(names)-1], sep) + last + names[len(names)-1]
}

// nameList is "vllm, trtllm or sglang".
func nameList() string { return List(", ", " or ") }

// Lookup returns the calendar of the backend called name. An unknown name is a
// one-line error listing the backends, with the closest one suggested when it is a
// likely typo (or a different case).
func Lookup(name string) (Calendar, error) {
	if c, ok := Backend(name).Calendar(); ok {
		return c, nil
	}
	hint := ""
	if s := closest(strings.ToLower(name)); s != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", s)
	}
	return nil, fmt.Errorf("backend %q: unknown%s; use %s", name, hint, nameList())
}

// Defaults returns the scheduler defaults of the backend called name (any case) at version
// (see Calendar.Defaults); an unknown backend is Lookup's error. name is a
// Backend or a plain string (a flag or scenario value).
func Defaults[N ~string](name N, version string) (Spec, error) {
	if err := checkVersion(version); err != nil {
		return Spec{}, err
	}
	c, ok := Backend(strings.ToLower(string(name))).Calendar()
	if !ok {
		_, err := Lookup(string(name))
		return Spec{}, err
	}
	return c.Defaults(version)
}

// closest is the registered backend within edit distance 2 of name, or "".
func closest(name string) Backend {
	best, bestD := Backend(""), 3
	for _, b := range Backends() {
		if d := editDistance(name, string(b)); d < bestD {
			best, bestD = b, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkVersion accepts "", "latest" or a dotted version whose components start
// with a digit in the first two components ("0.11.0", "v1.3.0rc20", "0.5.14.post1").
func checkVersion(v string) error {
	if v == "" || v == "latest" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	ok := len(parts) >= 2
	for i, p := range parts {
		if p == "" || (i < 2 && (p[0] < '0' || p[0] > '9')) {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("version %q: want a dotted version such as 0.11.0 (or empty for the latest defaults)", v)
	}
	return nil
}

// positive reports the first of the named knobs that is not > 0 for backend b.
func positive(b Backend, knobs ...knob) error {
	for _, k := range knobs {
		if k.v <= 0 {
			return fmt.Errorf("engine %s = %d: must be > 0 for backend %s", k.name, k.v, b)
		}
	}
	return nil
}

// knob is a named integer knob of a Spec.
type knob struct {
	name string
	v    int
}
