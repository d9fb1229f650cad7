// Package workload holds the workload input types shared by the queueing model and
// the oracle: the workload specification by fidelity tier (QUEUEING.md §2) and the
// explicit request records used by drivers and trace replay. It holds no scheduling
// logic.
package workload

// Tier is a workload fidelity tier (QUEUEING.md §2).
type Tier string

// Workload fidelity tiers.
const (
	W0 Tier = "W0" // isl, osl, prefix, concurrency (closed loop, fixed shape)
	W1 Tier = "W1" // + request rate (open loop, deterministic Poisson-equivalent stream)
	W2 Tier = "W2" // + isl/osl quantile strata
	W3 Tier = "W3" // + joint shape tuples, empirical inter-arrivals, exact trace replay
	W4 Tier = "W4" // + sessions (lanes of turns with think gaps)
)

// Spec describes a workload. Exactly one of Concurrency (closed loop) or RateRPS (open
// loop) is set.
type Spec struct {
	ISL    int // prompt length in tokens (mean shape when quantiles are given)
	OSL    int // output tokens per request (max_tokens)
	Prefix int // prompt tokens served from the prefix cache (< ISL)

	Concurrency  int     // closed loop: number of clients
	TurnaroundMs float64 // closed loop: client delay between a completion and the next send

	RateRPS     float64 // open loop: request rate (requests per second)
	NumRequests int     // open loop: number of requests to simulate (0 = evaluator default)

	// ISLQuantiles / OSLQuantiles, when set, are the shape marginals as equally
	// weighted quantile points (W2).
	ISLQuantiles []int
	OSLQuantiles []int
}

// Request is one explicit request, as used by the oracle's drivers and by trace replay.
type Request struct {
	ID        string
	ArrivalMs float64
	// PromptLen is the prompt length when PromptTokens is nil: that many tokens
	// distinct from every other request's.
	PromptLen int
	// PromptTokens gives the prompt's token ids (prefix caching works on them).
	PromptTokens []int
	// MaxTokens is the output cap (the request finishes after sampling token #MaxTokens).
	MaxTokens int
	// EOSAt, when > 0, makes the EOSAt-th sampled output token (1-based) an EOS.
	EOSAt int
}

// Len returns the prompt length of r.
func (r *Request) Len() int {
	if r.PromptTokens != nil {
		return len(r.PromptTokens)
	}
	return r.PromptLen
}
