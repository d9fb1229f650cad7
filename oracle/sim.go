package oracle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Options tune what a run records.
type Options struct {
	// PassLog records every pass (scheduled tokens per request, preemptions, free
	// blocks). Off for long runs.
	PassLog bool
	// MaxPasses bounds the run (0 = a bound derived from the workload); hitting it is
	// an error, never a hang.
	MaxPasses int
	// SummaryOnly keeps no per-token times (for long traces): RequestRecord.TokenTimesMs
	// is nil, each request keeps its first and last token times and count, the
	// inter-token gaps are counted by value for Summary (exact quantiles), and a
	// request's block table, block hashes and hash-id chain live only while it runs
	// (tables and hash arrays are recycled for later requests). Results are otherwise
	// identical.
	SummaryOnly bool
	// Progress, if set, is called now and then (every 1,024 scheduler iterations,
	// where Run polls its context) with the requests finished and the requests
	// held: for a progress report of a long run. It does not change the run.
	Progress func(done, total int)
}

// Sched is one entry of a pass: request index (into Result.Requests) and tokens.
type Sched struct {
	Req    int32
	Tokens int
}

// PassRecord is one pass of the per-pass log.
type PassRecord struct {
	Index      int // 1-based
	StartMs    float64
	EndMs      float64
	FreeBlocks int     // free-queue size right after the pass was scheduled
	Scheduled  []Sched // in schedule order
	Preempted  []int32 // request indices preempted while scheduling this pass
}

// RequestRecord is the outcome of one request.
type RequestRecord struct {
	ID              string
	ArrivalMs       float64
	PromptLen       int
	MaxTokens       int
	TTFTMs          float64   // first token time − arrival
	TokenTimesMs    []float64 // absolute emission time of every output token (nil with SummaryOnly)
	NumTokens       int       // output tokens emitted
	FirstTokenMs    float64   // absolute time of the first output token (0 when none)
	FinishMs        float64
	NumPreemptions  int
	NumCachedTokens int // prefix-hit tokens at first admission
	Client          int // closed-loop client, -1 otherwise
	Generation      int // closed loop: index of the request within its client
}

// Result is the outcome of a run.
type Result struct {
	Requests      []RequestRecord
	Passes        []PassRecord // only with Options.PassLog
	NumPasses     int          // non-empty passes run
	EndMs         float64      // end of the last pass
	ScheduledToks int          // Σ tokens scheduled over all passes
	gaps          *valueCounts // SummaryOnly: every inter-token gap, counted by value
}

// entry is one scheduled request of a pass in flight.
type entry struct {
	r       int32
	more    int32 // MTP (TRT-LLM, SGLang EAGLE): accepted drafts the step emits after its sampled token
	n       int   // tokens computed in the pass (0: a TRT-LLM chunk fully covered by reuse)
	from    int   // the request's computed tokens before the pass (prefix hits included)
	samples bool  // not a prefill chunk: the pass samples a token for it (V-R5, V-R7)
	dec     bool  // SGLang: a decode row of a running-batch request
	verify  bool  // vLLM MTP: a decode step verifying spec drafts (V-S1), a decode row whatever its tokens
	spec    int32 // vLLM MTP: the drafts the step verifies (V-S1)
}

// passBuf is a pass in flight (the batch queue holds at most two, V-R10).
type passBuf struct {
	entries   []entry
	preempted []int32
	start     float64
	end       float64
	index     int
}

// arrival is a future arrival (time, then insertion order).
type arrival struct {
	t   float64
	seq int32 // push order (ties); int32 like the request index: 16-byte entries
	r   int32
}

// Sim is one engine instance under simulation. Build it with New, add requests (or use
// a driver), then Run once.
type Sim struct {
	eng    engine.Spec
	timing timing.Timing
	opt    Options
	gaps   valueCounts // Options.SummaryOnly: inter-token gaps
	// gapV, gapN: the run of equal gaps not yet in gaps (a pass's decode rows
	// mostly share one gap: counted once per run, not once per token).
	gapV, gapN float64
	bs         int
	pool       *blockPool

	reqs     []req
	waiting  deque
	running  []int32
	arrivals []arrival // binary min-heap
	seq      int32

	now      float64
	gpuFree  float64
	depth    int // batch-queue size: 2 with async scheduling, else 1
	inflight [3]passBuf
	qhead    int
	qlen     int
	nPasses  int

	tp       timing.Pass
	hitBuf   []int32
	flatS    []Sched
	flatP    []int32
	passes   []PassRecord
	schedTk  int
	finished int

	gen       []int32 // closed loop: generation index of each request within its client
	allHashed bool    // tests: every block in the hash table (no per-request suffix chains)

	rules engineRules // eng.Backend's engine steps (rules.go)
	trt   trtState
	sgl   sglState

	fatal error // a condition found while scheduling that makes the workload unfinishable

	step stepState // the engine loop between iterations (step.go)

	dis *disState // one side of a disaggregated deployment (disagg_engine.go); nil: aggregated

	onFinish func(s *Sim, r int32, t float64)
	bufs     reqBufs // Options.SummaryOnly: finished requests' block tables and hashes

	// deferArrivals: add queues no arrival (the session driver sends later turns at
	// their previous turn's completion).
	deferArrivals bool
}

// New builds a simulator for eng with timing t.
func New(eng engine.Spec, t timing.Timing, opt Options) (*Sim, error) {
	if err := ValidateEngine(eng); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, errors.New("oracle: timing is nil; pass a timing.Timing")
	}
	rules := rulesFor(eng.Backend) // non-nil: ValidateEngine passed (TestRulesForRegistered)
	s := &Sim{eng: eng, rules: rules, timing: t, opt: opt, bs: eng.BlockSize, depth: 1}
	if eng.Traits().Overlap && eng.AsyncScheduling {
		s.depth = 2 // vLLM async scheduling (V-R10); TRT-LLM overlap executor (§4.2); SGLang overlap scheduler (§3.2)
	}
	s.pool = newBlockPool(eng.GPUBlocks(), eng.EnablePrefixCaching)
	s.initBackend()
	return s, nil
}

// Reserve makes room for n more requests (a capacity hint for long traces: the
// request array is then allocated once; results do not depend on it).
func (s *Sim) Reserve(n int) {
	if n > 0 {
		s.reqs = slices.Grow(s.reqs, n)
		s.arrivals = slices.Grow(s.arrivals, n)
	}
}

// Add queues an explicit request; it arrives at r.ArrivalMs. It returns its index.
func (s *Sim) Add(r workload.Request) (int32, error) {
	name := r.ID
	if name == "" {
		name = fmt.Sprintf("#%d", len(s.reqs))
	}
	p := r.Len()
	switch {
	case p <= 0:
		return -1, fmt.Errorf("request %s: prompt length %d: must be > 0", name, p)
	case r.MaxTokens <= 0:
		return -1, fmt.Errorf("request %s: max_tokens %d: must be > 0", name, r.MaxTokens)
	case r.EOSAt < 0:
		return -1, fmt.Errorf("request %s: eos_at %d: must be ≥ 0 (0 = never)", name, r.EOSAt)
	case math.IsNaN(r.ArrivalMs) || math.IsInf(r.ArrivalMs, 0) || r.ArrivalMs < 0:
		return -1, fmt.Errorf("request %s: arrival_ms %v: must be a finite number ≥ 0", name, r.ArrivalMs)
	case (p+s.bs-1)/s.bs > usableBlocks(&s.eng):
		return -1, fmt.Errorf("request %s: prompt of %d tokens needs %d blocks but the KV pool has %d usable (num_gpu_blocks − 1); raise num_gpu_blocks or shorten the prompt",
			name, p, (p+s.bs-1)/s.bs, usableBlocks(&s.eng))
	}
	for _, t := range r.PromptTokens {
		if t < 0 {
			return -1, fmt.Errorf("request %s: prompt token id %d: must be ≥ 0", name, t)
		}
	}
	return s.add(name, r.ArrivalMs, p, r.PromptTokens, 0, r.MaxTokens, r.EOSAt, -1), nil
}

// add creates a request (no validation) and schedules its arrival.
func (s *Sim) add(id string, at float64, p int, tokens []int, sharedLen, maxTokens, eosAt int, client int32) int32 {
	i := int32(len(s.reqs))
	nb := (p+maxTokens)/s.bs + 2
	var hashes []uint64
	d := req{p: p, tokens: tokens, sharedLen: sharedLen}
	nGlob := d.sharedBlocks(s.bs)
	if s.eng.EnablePrefixCaching && nGlob > 0 && !s.opt.SummaryOnly {
		hashes = make([]uint64, 0, nGlob) // sized once: no regrowth garbage
	}
	var table []int32
	var tokTimes []float64
	if !s.opt.SummaryOnly { // SummaryOnly: grown while the request runs, not held by queued ones
		table, tokTimes = make([]int32, 0, nb), make([]float64, 0, maxTokens)
	}
	s.reqs = append(s.reqs, req{
		id: idOr(id, i), uid: uint64(i) + 1, arrival: at, p: p, maxTokens: maxTokens, eosAt: eosAt,
		tokens: tokens, sharedLen: sharedLen, group: 1, numCached: -1, client: client,
		table:    table,
		hashes:   hashes,
		nGlob:    nGlob,
		tokTimes: tokTimes,
	})
	if !s.deferArrivals {
		s.pushArrival(at, i)
	}
	return i
}

func (s *Sim) pushArrival(t float64, r int32) {
	s.arrivals = heapPush(s.arrivals, arrival{t: t, seq: s.seq, r: r}, arrLess)
	s.seq++
}

func arrLess(a, b arrival) bool { return a.t < b.t || (a.t == b.t && a.seq < b.seq) }

func (s *Sim) popArrival() arrival {
	var top arrival
	s.arrivals, top = heapPop(s.arrivals, arrLess)
	return top
}

// heapPush appends x to h, a binary min-heap under less, and sifts it up.
func heapPush[T any](h []T, x T, less func(a, b T) bool) []T {
	h = append(h, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

// heapPop removes the least element of h, a non-empty binary min-heap under
// less, and returns the shortened heap and that element.
func heapPop[T any](h []T, less func(a, b T) bool) ([]T, T) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && less(h[l], h[m]) {
			m = l
		}
		if r < len(h) && less(h[r], h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return h, top
}

// absorb moves every request that has arrived by now to the waiting tail, in arrival
// order (ties in insertion order): arrivals are seen at pass boundaries only.
func (s *Sim) absorb() {
	for len(s.arrivals) > 0 && s.arrivals[0].t <= s.now {
		a := s.popArrival()
		if s.absorbRemote(a.r) {
			continue
		}
		s.reqs[a.r].st = stWaiting
		s.enqueueArrival(a.r)
	}
}

func (s *Sim) hasRequests() bool {
	return len(s.running) > 0 || s.waitingLen() > 0 || s.rules.pending(s)
}

// Run simulates until every request finished. A workload that can never finish (a
// request that cannot be admitted even into an empty engine) is an error naming it.
func (s *Sim) Run(ctx context.Context) (*Result, error) {
	maxPasses := s.opt.MaxPasses
	if maxPasses <= 0 {
		maxPasses = 1000
		for i := range s.reqs {
			maxPasses += 4 * (s.reqs[i].p + s.reqs[i].maxTokens)
		}
	}
	s.step.passCap = maxPasses
	for iter := 0; ; iter++ {
		if iter&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("oracle run: %w", err)
			}
			if s.opt.Progress != nil {
				s.opt.Progress(s.finished, len(s.reqs))
			}
		}
		did, err := s.iterate(math.Inf(1))
		if err != nil {
			return nil, err
		}
		if !did {
			break
		}
	}
	if s.finished != len(s.reqs) {
		return nil, fmt.Errorf("oracle run: internal: the engine went idle with %d of %d requests finished", s.finished, len(s.reqs))
	}
	s.bufs = reqBufs{} // the recycled buffers are garbage once the run is over
	return s.result(), nil
}

// errNoCompletion reports a run past its pass bound.
func errNoCompletion(s *Sim) error {
	return fmt.Errorf("oracle run: no completion after %d passes (%d of %d requests finished); the workload does not make progress", s.nPasses, s.finished, len(s.reqs))
}

// workInFlight reports a queued pass that schedules or preempts something.
func (s *Sim) workInFlight() bool {
	for k := 0; k < s.qlen; k++ {
		pb := &s.inflight[(s.qhead+k)%len(s.inflight)]
		if len(pb.entries) > 0 || len(pb.preempted) > 0 {
			return true
		}
	}
	return false
}

// stuckError names the request that blocks an otherwise idle engine.
func (s *Sim) stuckError() error {
	if s.waitingLen() > 0 {
		r := &s.reqs[s.waitingHead()]
		return fmt.Errorf("oracle run: request %s (prompt %d + %d generated tokens) can never be scheduled: the engine is idle and it still does not fit (KV pool %d usable blocks of %d tokens, budget or batch limits); the workload can never finish",
			r.id, r.p, r.g, usableBlocks(&s.eng), s.bs)
	}
	return fmt.Errorf("oracle run: the engine makes no progress with %d running requests", len(s.running))
}

// pushPass takes the next free pass buffer of the batch queue.
func (s *Sim) pushPass() *passBuf {
	i := (s.qhead + s.qlen) % len(s.inflight)
	s.qlen++
	pb := &s.inflight[i]
	pb.entries = pb.entries[:0]
	pb.preempted = pb.preempted[:0]
	return pb
}

func (s *Sim) popPass() *passBuf {
	pb := &s.inflight[s.qhead]
	s.qhead = (s.qhead + 1) % len(s.inflight)
	s.qlen--
	return pb
}

// launch prices the pass and places it on the GPU timeline: passes run back to back
// in launch order; an empty pass takes no time.
func (s *Sim) launch(pb *passBuf) error {
	pb.start = max(s.now, s.gpuFree)
	pb.end = pb.start
	pb.index = 0 // a scheduler step that ran no pass (it only preempted) keeps index 0
	if len(pb.entries) > 0 {
		s.buildTimingPass(pb)
		ms, err := s.timing.PassMs(&s.tp)
		if err != nil {
			return fmt.Errorf("oracle run: pricing pass %d (%d prefill tokens, %d decode rows): %w",
				s.nPasses+1, s.tp.PrefillTokens(), len(s.tp.Decode), err)
		}
		if !(ms > 0) || math.IsInf(ms, 0) {
			return fmt.Errorf("oracle run: timing returned %v ms for pass %d (%d prefill tokens, %d decode rows): must be a finite number > 0",
				ms, s.nPasses+1, s.tp.PrefillTokens(), len(s.tp.Decode))
		}
		pb.end = pb.start + ms
		s.nPasses++
		pb.index = s.nPasses
		s.gpuFree = pb.end
		for _, e := range pb.entries {
			s.schedTk += e.n
		}
		if s.dis != nil {
			s.noteLaunch(pb)
		}
	}
	if s.opt.PassLog && (len(pb.entries) > 0 || len(pb.preempted) > 0) {
		s.logPass(pb)
	}
	return nil
}

// logPass appends pb to the per-pass log.
func (s *Sim) logPass(pb *passBuf) {
	i0, j0 := len(s.flatS), len(s.flatP)
	for _, e := range pb.entries {
		s.flatS = append(s.flatS, Sched{Req: e.r, Tokens: e.n})
	}
	s.flatP = append(s.flatP, pb.preempted...)
	s.passes = append(s.passes, PassRecord{
		Index: pb.index, StartMs: pb.start, EndMs: pb.end, FreeBlocks: s.freeBlocks(),
		Scheduled: s.flatS[i0:len(s.flatS):len(s.flatS)], Preempted: s.flatP[j0:len(s.flatP):len(s.flatP)],
	})
}

// result collects the per-request records.
func (s *Sim) result() *Result {
	res := &Result{Passes: s.passes, NumPasses: s.nPasses, EndMs: s.gpuFree, ScheduledToks: s.schedTk}
	if s.opt.SummaryOnly {
		s.flushGaps()
		g := s.gaps // a copy: the result must not keep the whole Sim reachable
		res.gaps = &g
	}
	res.Requests = make([]RequestRecord, len(s.reqs))
	for i := range s.reqs {
		r := &s.reqs[i]
		rec := RequestRecord{
			ID: r.id, ArrivalMs: r.arrival, PromptLen: r.p, MaxTokens: r.maxTokens,
			TokenTimesMs: r.tokTimes, NumTokens: r.nTok, FinishMs: r.finish, NumPreemptions: r.preemptions,
			NumCachedTokens: max(r.numCached, 0), Client: int(r.client),
		}
		if i < len(s.gen) {
			rec.Generation = int(s.gen[i])
		}
		if r.nTok > 0 {
			rec.TTFTMs, rec.FirstTokenMs = r.firstTok-r.arrival, r.firstTok
		}
		res.Requests[i] = rec
	}
	return res
}

// buildTimingPass fills s.tp per the timing.Pass rule: an entry is a decode row iff
// its request had computed its whole prompt before the pass and it schedules exactly
// one token, or it is a vLLM MTP step (its drafts verified in the row, V-S1)
// (context = computed before + 1); every other entry is a Chunk.
func (s *Sim) buildTimingPass(pb *passBuf) {
	s.tp.Reset()
	for _, e := range pb.entries {
		r := &s.reqs[e.r]
		before := e.from
		if e.n == 0 {
			continue
		}
		if e.verify || before >= r.p && e.n == 1 {
			s.tp.Decode = append(s.tp.Decode, before+1)
		} else {
			s.tp.Prefill = append(s.tp.Prefill, timing.Chunk{Tokens: e.n, Computed: before, Prefix: min(r.hits, before)})
		}
	}
}

// appendToken records one sampled output token of r at time t and applies the stop
// checks (V-R7): EOS at eos_at, length at max_tokens. It reports whether r stopped.
func (s *Sim) appendToken(ri int32, t float64) bool {
	r := &s.reqs[ri]
	r.g++
	switch {
	case r.nTok == 0:
		r.firstTok = t
	case s.opt.SummaryOnly:
		if g := t - r.lastTok; g == s.gapV && s.gapN > 0 {
			s.gapN++
		} else {
			s.flushGaps()
			s.gapV, s.gapN = g, 1
		}
	}
	r.nTok++
	r.lastTok = t
	if !s.opt.SummaryOnly {
		r.tokTimes = append(r.tokTimes, t)
	}
	return (r.eosAt > 0 && r.g == r.eosAt) || r.g >= r.maxTokens
}

// flushGaps counts the pending run of equal gaps (appendToken). Counts are whole
// numbers, so a run counted at once sums as its tokens one by one would.
func (s *Sim) flushGaps() {
	if s.gapN > 0 {
		s.gaps.add(s.gapV, s.gapN)
		s.gapN = 0
	}
}

// finish marks r finished at t, frees its blocks and calls the driver hook.
func (s *Sim) finishReq(ri int32, t float64) {
	r := &s.reqs[ri]
	r.st = stFinished
	r.finish = t
	if s.dis != nil && s.dis.holdKV {
		s.dis.held++ // V-P3, T-D1: the KV stays until the decode side pulled it
	} else {
		s.freeTable(ri)
	}
	s.finished++
	if s.onFinish != nil {
		s.onFinish(s, ri, t) // a session's next turn inherits r's block hashes here
	}
	// Nothing reads them once r has finished (recycled) — unless a disaggregated
	// prefill side still holds r's KV for the pull.
	if s.opt.SummaryOnly && (s.dis == nil || !s.dis.holdKV) {
		r = &s.reqs[ri] // onFinish may have grown s.reqs
		s.bufs.put(r.table, r.hashes)
		r.table, r.hashes, r.chain = nil, nil, nil // the chain named its blocks for lookups only
		s.dropOwnBlocks(ri)
	}
}

// freeTable releases r's blocks in reverse order (the tail blocks are evicted first,
// §2.5) and clears its table.
func (s *Sim) freeTable(ri int32) {
	r := &s.reqs[ri]
	for i := len(r.table) - 1; i >= 0; i-- {
		s.pool.release(r.table[i])
	}
	r.table = r.table[:0]
	r.nCachedBl = 0
}

func (s *Sim) freeBlocks() int { return s.pool.nfree }

// idOr names unnamed (driver) requests by their index.
func idOr(id string, i int32) string {
	if id != "" {
		return id
	}
	return "r" + strconv.Itoa(int(i))
}

// dropFinished removes finished requests from the running list, keeping order.
func (s *Sim) dropFinished() {
	k := 0
	for _, ri := range s.running {
		if s.reqs[ri].st != stFinished {
			s.running[k] = ri
			k++
		}
	}
	s.running = s.running[:k]
}
