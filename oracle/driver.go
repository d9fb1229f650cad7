package oracle

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Shape is the fixed request shape of the synthetic drivers: prompt ISL tokens of which
// the first Prefix are a prompt prefix shared by every request (a prefix-cache hit once
// cached; Prewarm caches it before t = 0), OSL output tokens (max_tokens).
type Shape struct {
	ISL    int
	OSL    int
	Prefix int
	// Prewarm registers the shared prefix's full blocks in the prefix cache before the
	// first arrival (as if an earlier request had computed them), so that every
	// request, the first included, hits it. Needs prefix caching on.
	Prewarm bool
	// Draw, when set, gives the k-th created request's (isl, osl) (k = creation
	// index, 0-based), e.g. workload.Spec.Shape for the W2 shape strata; ISL and OSL
	// are then only the validation bounds (the largest shapes).
	Draw func(k int) (isl, osl int)
}

// draw returns the k-th request's shape, validated against the prefix.
func (sh *Shape) draw(k int) (int, int, error) {
	if sh.Draw == nil {
		return sh.ISL, sh.OSL, nil
	}
	isl, osl := sh.Draw(k)
	if isl <= sh.Prefix || osl <= 0 || isl > sh.ISL || osl > sh.OSL {
		return 0, 0, fmt.Errorf("driver shape %d = (isl %d, osl %d): must have prefix %d < isl ≤ %d and 0 < osl ≤ %d", k, isl, osl, sh.Prefix, sh.ISL, sh.OSL)
	}
	return isl, osl, nil
}

func (sh Shape) validate(e *engine.Spec) error {
	switch {
	case sh.ISL <= 0:
		return fmt.Errorf("driver isl = %d: must be > 0", sh.ISL)
	case sh.OSL <= 0:
		return fmt.Errorf("driver osl = %d: must be > 0", sh.OSL)
	case sh.Prefix < 0 || sh.Prefix >= sh.ISL:
		return fmt.Errorf("driver prefix = %d: must be in [0, isl = %d)", sh.Prefix, sh.ISL)
	case sh.Prewarm && !e.EnablePrefixCaching:
		return fmt.Errorf("driver prewarm: prefix caching is off (enable_prefix_caching = false); a prefix cannot be cached")
	case (sh.ISL+e.BlockSize-1)/e.BlockSize > usableBlocks(e):
		return fmt.Errorf("driver isl = %d needs %d KV blocks but the pool has %d usable; raise num_gpu_blocks", sh.ISL, (sh.ISL+e.BlockSize-1)/e.BlockSize, usableBlocks(e))
	}
	return nil
}

// prewarm computes the shared prefix's full blocks once (allocate, register, free), so
// they sit in the free queue as cached blocks.
func (s *Sim) prewarm(prefix int) {
	if prefix < s.bs || !s.eng.EnablePrefixCaching {
		return
	}
	d := req{p: prefix, sharedLen: prefix, group: 1}
	nb := prefix / s.bs
	d.ensureHashes(nb, s.bs)
	blocks := make([]int32, 0, nb)
	for i := 0; i < nb && s.pool.nfree > 0; i++ {
		b := s.popBlock()
		s.pool.register(b, d.hashes[i])
		blocks = append(blocks, b)
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		s.pool.release(blocks[i])
	}
}

// ClosedLoop is the closed-loop driver (QUEUEING.md §1): Clients clients each send
// Generations requests one after another; a client's next request arrives at the
// previous one's finish + TurnaroundMs + ClientRTTMs. All clients send their first
// request at 0 unless StartMs gives each client's first arrival.
type ClosedLoop struct {
	Shape
	Clients      int
	Generations  int
	TurnaroundMs float64
	// ClientRTTMs is the client round trip of a replacement request (detokenise,
	// stream, client, HTTP, tokenise): it reaches the scheduler this long after the
	// turnaround, so a real engine's next pass, which starts microseconds after the
	// completion (V-R1/S-R1/T-R1 schedule at the pass boundary), does not see it.
	// Identical to queueing.Options.ClientRTTMs; 0 is the exact boundary semantics.
	ClientRTTMs float64
	// StartMs, when set (len = Clients), is each client's first arrival (the
	// evaluator's stagger phases, queueing/stagger.go); nil sends all at 0.
	StartMs []float64
	// KeepBusy keeps every client sending past Generations until all requests of
	// generations < Generations have finished (the evaluator's convention: the
	// measured requests always compete with a full population).
	KeepBusy bool
}

// RunClosedLoop simulates the closed loop. Result.Requests are in creation order;
// each record carries its Client and Generation.
func (s *Sim) RunClosedLoop(ctx context.Context, cl ClosedLoop) (*Result, error) {
	if err := cl.Shape.validate(&s.eng); err != nil {
		return nil, err
	}
	switch {
	case cl.Clients <= 0:
		return nil, fmt.Errorf("closed loop concurrency = %d: must be > 0", cl.Clients)
	case cl.Generations <= 0:
		return nil, fmt.Errorf("closed loop generations = %d: must be > 0", cl.Generations)
	case cl.TurnaroundMs < 0 || math.IsNaN(cl.TurnaroundMs) || math.IsInf(cl.TurnaroundMs, 0):
		return nil, fmt.Errorf("closed loop turnaround_ms = %v: must be a finite number ≥ 0", cl.TurnaroundMs)
	case cl.ClientRTTMs < 0 || math.IsNaN(cl.ClientRTTMs) || math.IsInf(cl.ClientRTTMs, 0):
		return nil, fmt.Errorf("closed loop client_rtt_ms = %v: must be a finite number ≥ 0", cl.ClientRTTMs)
	case cl.StartMs != nil && len(cl.StartMs) != cl.Clients:
		return nil, fmt.Errorf("closed loop start_ms: %d values for %d clients; give one per client", len(cl.StartMs), cl.Clients)
	}
	for i, t := range cl.StartMs {
		if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) || (i > 0 && t < cl.StartMs[i-1]) {
			return nil, fmt.Errorf("closed loop start_ms[%d] = %v: must be finite, ≥ 0 and non-decreasing", i, t)
		}
	}
	if cl.Prewarm {
		s.prewarm(cl.Prefix)
	}
	s.reqs = make([]req, 0, cl.Clients*cl.Generations)
	s.gen = make([]int32, 0, cl.Clients*cl.Generations)
	sent := make([]int, cl.Clients)
	var drawErr error
	spawn := func(c int, at float64) {
		isl, osl, err := cl.draw(len(s.reqs))
		if err != nil {
			if drawErr == nil {
				drawErr = err
			}
			isl, osl = cl.ISL, cl.OSL
		}
		s.gen = append(s.gen, int32(sent[c]))
		s.add("", at, isl, nil, cl.Prefix, osl, 0, int32(c))
		sent[c]++
	}
	for c := 0; c < cl.Clients; c++ {
		at := 0.0
		if cl.StartMs != nil {
			at = cl.StartMs[c]
		}
		spawn(c, at)
	}
	pending := cl.Clients * cl.Generations // requests of generations < Generations not yet finished
	s.onFinish = func(s *Sim, ri int32, t float64) {
		if int(s.gen[ri]) < cl.Generations {
			pending--
		}
		c := int(s.reqs[ri].client)
		if sent[c] < cl.Generations || (cl.KeepBusy && pending > 0) {
			spawn(c, t+cl.TurnaroundMs+cl.ClientRTTMs)
		}
	}
	s.opt.MaxPasses = max(s.opt.MaxPasses, 1000+4*cl.Clients*cl.Generations*(cl.ISL+cl.OSL))
	res, err := s.Run(ctx)
	if drawErr != nil {
		return nil, drawErr
	}
	return res, err
}

// OpenLoop is the open-loop driver: NumRequests requests of one shape arriving at
// ArrivalsMs when given (explicit times, e.g. the model's W1 stream), else as a
// Poisson process of RateRPS drawn from a PCG generator seeded with Seed (fixed seed,
// bit-reproducible).
type OpenLoop struct {
	Shape
	RateRPS     float64
	NumRequests int
	Seed        uint64
	ArrivalsMs  []float64
}

// RunOpenLoop simulates the open loop.
func (s *Sim) RunOpenLoop(ctx context.Context, ol OpenLoop) (*Result, error) {
	if err := ol.Shape.validate(&s.eng); err != nil {
		return nil, err
	}
	times := ol.ArrivalsMs
	if times == nil {
		if !(ol.RateRPS > 0) || math.IsInf(ol.RateRPS, 0) {
			return nil, fmt.Errorf("open loop rate = %v rps: must be a finite number > 0", ol.RateRPS)
		}
		if ol.NumRequests <= 0 {
			return nil, fmt.Errorf("open loop num_requests = %d: must be > 0", ol.NumRequests)
		}
		rng := rand.New(rand.NewPCG(ol.Seed, 0x6f7261636c65))
		times = make([]float64, ol.NumRequests)
		t := 0.0
		for i := range times {
			times[i] = t
			t += rng.ExpFloat64() * 1000 / ol.RateRPS
		}
	}
	for i, t := range times {
		if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 || (i > 0 && t < times[i-1]) {
			return nil, fmt.Errorf("open loop arrival %d = %v ms: arrivals must be finite, ≥ 0 and non-decreasing", i, t)
		}
	}
	if ol.Prewarm {
		s.prewarm(ol.Prefix)
	}
	s.reqs = make([]req, 0, len(times))
	for k, t := range times {
		isl, osl, err := ol.draw(k)
		if err != nil {
			return nil, err
		}
		s.add("", t, isl, nil, ol.Prefix, osl, 0, -1)
	}
	return s.Run(ctx)
}

// RunTrace simulates explicit requests (trace replay): per-request arrival and prompt
// (length, or token ids for prefix caching), max_tokens and optional EOS position.
func (s *Sim) RunTrace(ctx context.Context, reqs []workload.Request) (*Result, error) {
	for _, r := range reqs {
		if _, err := s.Add(r); err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
	}
	return s.Run(ctx)
}

// SharedPrefix names the shareable head of a request's prompt without token ids
// (issue 13): either Len tokens of prefix group Group (requests of one group share
// the content of their common prefix length), or hash ids of HashBlock-token blocks
// (a trace's, e.g. Mooncake's 512-token blocks; a block's identity is its id chain).
// The rest of the prompt is unique to the request.
type SharedPrefix struct {
	Group     uint64
	Len       int
	HashIDs   []int64
	HashBlock int
}

// AddShared queues a request whose prompt starts with a shared prefix (Add's checks
// apply; r.PromptTokens must be nil). It returns the request's index.
func (s *Sim) AddShared(r workload.Request, sp SharedPrefix) (int32, error) {
	name := idOr(r.ID, int32(len(s.reqs)))
	p := r.Len()
	switch {
	case r.PromptTokens != nil:
		return -1, fmt.Errorf("request %s: a shared prefix needs prompt_len, not prompt_tokens", name)
	case sp.HashIDs != nil && sp.Len != 0:
		return -1, fmt.Errorf("request %s: give a prefix length or hash ids, not both", name)
	case sp.Len < 0 || sp.Len > p:
		return -1, fmt.Errorf("request %s: prefix_len %d: must be in 0..prompt_len = %d", name, sp.Len, p)
	case sp.HashIDs != nil && sp.HashBlock < 1:
		return -1, fmt.Errorf("request %s: hash block %d: must be ≥ 1 token", name, sp.HashBlock)
	case sp.HashIDs != nil && len(sp.HashIDs) > (p+sp.HashBlock-1)/sp.HashBlock:
		return -1, fmt.Errorf("request %s: %d hash ids for %d prompt tokens: at most one per %d tokens", name, len(sp.HashIDs), p, sp.HashBlock)
	}
	i, err := s.Add(r)
	if err != nil {
		return -1, err
	}
	q := &s.reqs[i]
	if sp.HashIDs != nil {
		q.chain = make([]uint64, len(sp.HashIDs))
		h := uint64(tagShared)
		for k, id := range sp.HashIDs {
			h = mix(h, uint64(id))
			q.chain[k] = h
		}
		q.hashBlock = sp.HashBlock
	} else {
		q.sharedLen, q.group = sp.Len, sp.Group
	}
	q.nGlob = q.sharedBlocks(s.bs)
	if s.eng.EnablePrefixCaching && q.nGlob > 0 && !s.opt.SummaryOnly {
		q.hashes = make([]uint64, 0, q.nGlob)
	}
	return i, nil
}
