package oracle

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/aicdb/aicdb/engine"
)

// Prefix-cache reuse oracle (issue 13): per-request prefix-cache hits of a trace under
// one engine's cache policy and a KV budget, from hash ids (Mooncake: one id per
// HashBlock prompt tokens, the last block partial) rather than token ids.
//
// It replays the trace in arrival order through the cache alone: a request looks up
// its prefix, then its prompt (and its output, as content unique to it) is stored and
// released in the engine's free order — at once (Add: KVBlocks is then the capacity
// the cache can use, an upper bound on hits), or at the request's finish (AddAt: a
// running request pins its KV, which is neither evictable nor free, as in the
// engines; the finish times come from a replay). Policies:
//
//   - vLLM (V-R8, §2.5): the oracle's own blockPool: only FULL blocks of BlockSize
//     tokens are hashed and reusable, hits are whole blocks with at most isl − 1
//     tokens, freed blocks go to the LRU free queue tail in reverse block order (a
//     request's tail blocks are evicted first), a hit removes a block from the queue.
//   - SGLang (§3.6): a radix tree with LRU eviction of unreferenced leaves; hits are
//     capped at isl − 1 tokens and rounded down to whole pages (BlockSize = page size,
//     1 by default); the finished request's prompt and output are inserted.
//   - TRT-LLM (T-R5): a radix tree of blocks (BlockSize = tokens_per_block) with LRU
//     eviction of leaf blocks; at most isl − 1 tokens reused, and with partial reuse
//     (the default) the last partially matching block counts too.
//
// The tree's nodes are hash blocks (≤ HashBlock tokens), the finest unit the trace
// identifies: SGLang evicts whole radix nodes, which can be longer; this is the
// approximation.

// ReuseConfig configures a ReuseSim.
type ReuseConfig struct {
	Backend engine.Backend
	// KVBlocks is the cache capacity in blocks (vLLM, TRT-LLM) or pages (SGLang).
	KVBlocks int
	// BlockSize is tokens per block (vLLM block_size, TRT-LLM tokens_per_block) or per
	// page (SGLang page_size). 0 = the engine default: 16, 32, 1.
	BlockSize int
	// HashBlock is the prompt tokens one hash id covers (Mooncake: 512).
	HashBlock int
}

// maxRunWidth is the most vLLM blocks a hash id may cover for the reuse oracle to key
// its prefix-cache map by hash id (runIndex: a slot per covered block for every hash
// id with a block cached); beyond it, by block hash.
const maxRunWidth = 64

// MaxReuseVLLMBlocks bounds the vLLM pool (allocated whole, ~40 bytes a block).
const MaxReuseVLLMBlocks = 1 << 22

// registered reports that b is one of the engine registry's backends.
func registered(b engine.Backend) bool {
	_, ok := b.Calendar()
	return ok
}

// DefaultReuseBlockSize is each engine's default block (page) size (vLLM's 16 for
// an unknown backend).
func DefaultReuseBlockSize(b engine.Backend) int {
	if c, ok := b.Calendar(); ok {
		if d, err := c.Defaults(""); err == nil {
			return d.BlockSize
		}
	}
	return 16
}

// ReuseSim is the reuse oracle's state; requests are added in arrival order.
type ReuseSim struct {
	cfg   ReuseConfig
	seq   uint64
	chain []uint64
	// vLLM
	pool  *blockPool
	table []int32
	// runs, when a hash id covers at most maxRunWidth blocks: the prefix-cache map
	// keyed by (chain hash, block) instead of the pool's block-hash table; run[k] is
	// the run id of the current request's chain position k (-1: no block of it can be
	// cached), the index into count of its chain hash.
	runs *runIndex
	run  []int32
	// SGLang, TRT-LLM
	tree *reuseTree
	// future: per chain hash, an index into count (and, with runs, the run id), so
	// that add's work per chain position is one map lookup (entries are never deleted
	// before reset). When Expect was called (expected), count is how many requests not
	// yet added name the chain hash (vLLM only registers blocks someone will still look
	// up); without Expect, future only names runs (count unused).
	future   map[uint64]int32
	count    []int32
	expected bool
	// dense (with runs, until a hash id contradicts it): every hash id names one
	// chain — as Mooncake's do, numbered 0, 1, … — so the id itself is the index into
	// count and the run, without the map; chainOf[id] is its chain hash (0 = none
	// yet), checked at every use. A contradiction, a negative or a too sparse id
	// moves every entry to future (the ids stay the indices).
	dense   bool
	chainOf []uint64
	live    []bool // per chain position of the current request: a request still to come names it
	// held are the requests added by AddAt still pinning their KV, by finish time.
	held          []heldReq
	pendingFinish float64 // AddAt: the finish time of the request being added
	// spare are released held requests' unit slices, reused by the next AddAt (LIFO:
	// deterministic); a held request's units otherwise cost an allocation each.
	spare [][]int32
}

// heldReq is a request pinning its blocks (vLLM) or tree path (SGLang, TRT-LLM)
// until finish.
type heldReq struct {
	finish float64
	seq    uint64
	units  []int32
}

func heldLess(a, b heldReq) bool {
	return a.finish < b.finish || (a.finish == b.finish && a.seq < b.seq)
}

// NewReuse checks cfg and builds an empty cache.
func NewReuse(cfg ReuseConfig) (*ReuseSim, error) {
	return newReuse(cfg, maxRunWidth)
}

// newReuse is NewReuse keying the vLLM prefix-cache map by hash id (runIndex) when a
// hash id covers at most maxWidth blocks.
func newReuse(cfg ReuseConfig, maxWidth int) (*ReuseSim, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultReuseBlockSize(cfg.Backend)
	}
	switch {
	case !registered(cfg.Backend):
		return nil, fmt.Errorf("backend %q: must be %s", cfg.Backend, engine.List(", ", " or "))
	case cfg.KVBlocks < 1 || cfg.KVBlocks > 1<<28:
		return nil, fmt.Errorf("kv blocks %d: must be in 1..%d", cfg.KVBlocks, 1<<28)
	case cfg.Backend == engine.VLLM && cfg.KVBlocks > MaxReuseVLLMBlocks:
		return nil, fmt.Errorf("kv blocks %d: the vLLM pool is allocated whole, at most %d blocks (for an unbounded cache read the trace's own reuse in 'aicdb trace stats')", cfg.KVBlocks, MaxReuseVLLMBlocks)
	case cfg.BlockSize < 1 || cfg.BlockSize > 1<<16:
		return nil, fmt.Errorf("block size %d: must be in 1..65536", cfg.BlockSize)
	case cfg.HashBlock < 1:
		return nil, errors.New("hash block must be ≥ 1 token")
	}
	s := &ReuseSim{cfg: cfg}
	if cfg.Backend == engine.VLLM {
		width := (cfg.HashBlock + cfg.BlockSize - 1) / cfg.BlockSize
		// block 0 is the null block; with runs the pool needs no block-hash table
		s.pool = newBlockPool(cfg.KVBlocks+1, width > maxWidth)
		if width <= maxWidth {
			s.runs = &runIndex{width: int32(width)}
			s.dense = true
		}
	} else {
		s.tree = newReuseTree(int64(cfg.KVBlocks))
	}
	return s, nil
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ownHash names block i (-1: the tail node) of content unique to request seq.
func ownHash(seq uint64, i int) uint64 {
	return mix64(mix64(seq^0x5bd1e9955bd1e995) + uint64(i+2))
}

// chainHashes sets s.chain[k] = hash of hash ids 0..k (a block's identity includes its
// whole prefix, as in every engine).
func (s *ReuseSim) chainHashes(ids []int64) []uint64 {
	s.chain = s.chain[:0]
	h := uint64(0x6a09e667f3bcc909)
	for _, id := range ids {
		h = mix64(h ^ mix64(uint64(id)+0x9e3779b97f4a7c15))
		s.chain = append(s.chain, h)
	}
	return s.chain
}

// Expect announces a request that will be added later (call it for every request,
// in any order, before the first Add). It changes no hit, only the cost: the vLLM pool
// then registers a block only if a request still to come names its hash block —
// a block nobody will look up sits in the free queue the same registered or not, and
// evicting it frees nothing anyone could hit (the same argument as for a request's
// own tail). Without Expect every identified prompt block is registered.
func (s *ReuseSim) Expect(ids []int64) {
	if s.pool == nil {
		return
	}
	s.expected = true
	for k, h := range s.chainHashes(ids) {
		i, _ := s.entry(ids[k], h, true)
		s.count[i]++
	}
}

// Add replays one request (isl prompt tokens, osl output tokens, hash ids of its
// prompt blocks) and returns its prefix-cache hit in tokens; its KV is released at
// once.
func (s *ReuseSim) Add(isl, osl int, ids []int64) int {
	return s.add(isl, osl, ids, false)
}

// AddAt replays one request that runs from arrivalMs to finishMs: first every request
// added by AddAt that finished by arrivalMs releases its KV (in finish order), then
// this one looks up its prefix and stores its prompt and output, pinned until
// finishMs. Requests must come in non-decreasing arrivalMs.
func (s *ReuseSim) AddAt(arrivalMs, finishMs float64, isl, osl int, ids []int64) int {
	for len(s.held) > 0 && s.held[0].finish <= arrivalMs {
		h := s.popHeld()
		s.releaseHeld(h)
		s.recycle(h.units)
	}
	s.pendingFinish = finishMs
	return s.add(isl, osl, ids, true)
}

// pushHeld and popHeld keep s.held a binary min-heap by (finish, seq).
func (s *ReuseSim) pushHeld(h heldReq) { s.held = heapPush(s.held, h, heldLess) }

func (s *ReuseSim) popHeld() heldReq {
	var top heldReq
	s.held, top = heapPop(s.held, heldLess)
	return top
}

// releaseHeld frees a finished request's KV in the engine's order: vLLM blocks in
// reverse (§2.5), tree nodes deepest first.
func (s *ReuseSim) releaseHeld(h heldReq) {
	for i := len(h.units) - 1; i >= 0; i-- {
		if s.pool != nil {
			s.pool.release(h.units[i])
		} else {
			s.tree.unpin(h.units[i])
		}
	}
}

// recycle keeps a released held request's units slice for the next AddAt.
func (s *ReuseSim) recycle(units []int32) {
	s.spare = append(s.spare, units[:0])
}

func (s *ReuseSim) add(isl, osl int, ids []int64, hold bool) int {
	s.seq++
	chain := s.chainHashes(ids)
	if s.pool != nil {
		s.live, s.run = s.live[:0], s.run[:0]
		for k, h := range chain {
			var i int32
			live := true
			switch {
			case s.expected:
				var ok bool
				if i, ok = s.entry(ids[k], h, false); ok {
					s.count[i]--
					live = s.count[i] > 0
				} else { // announced by nobody: never registered, never hit
					i, live = -1, false
				}
			case s.runs == nil: // keyed by block hash: no run
				i = -1
			default:
				i, _ = s.entry(ids[k], h, true)
			}
			s.live = append(s.live, live)
			s.run = append(s.run, i)
		}
		hit := s.addVLLM(isl, osl, chain)
		s.finishAdd(s.table, hold)
		return hit
	}
	hit := s.addTree(isl, osl, chain)
	s.finishAdd(s.tree.path, hold)
	return hit
}

// finishAdd releases the request's KV (units: its vLLM blocks or tree path) now, or
// pins it until the finish time AddAt set.
func (s *ReuseSim) finishAdd(units []int32, hold bool) {
	if !hold {
		s.releaseHeld(heldReq{units: units})
		return
	}
	var own []int32
	if l := len(s.spare); l > 0 {
		own, s.spare = s.spare[l-1], s.spare[:l-1]
	}
	s.pushHeld(heldReq{finish: s.pendingFinish, seq: s.seq, units: append(own, units...)})
}

// entry returns the index into count (and the run) of the chain position with hash id
// id and chain hash h, making it when missing if create is set; false: missing.
func (s *ReuseSim) entry(id int64, h uint64, create bool) (int32, bool) {
	if s.dense {
		switch n := int64(len(s.chainOf)); {
		case id >= 0 && id < n && s.chainOf[id] == h && h != 0:
			return int32(id), true
		case id >= 0 && id < n && s.chainOf[id] == 0 && h != 0:
			if !create {
				return -1, false
			}
			s.chainOf[id] = h
			return int32(id), true
		case id >= n && id <= 4*n+1<<16 && h != 0: // dense enough to keep an array
			if !create {
				return -1, false
			}
			for int64(len(s.chainOf)) <= id {
				s.chainOf = append(s.chainOf, 0)
				s.newEntry()
			}
			s.chainOf[id] = h
			return int32(id), true
		case id >= 0 && id < n && !create:
			return -1, false // another chain under a known id: not announced
		}
		s.undense()
	}
	if s.future == nil {
		s.future = make(map[uint64]int32)
	}
	i, ok := s.future[h]
	if !ok && create {
		i, ok = s.newEntry(), true
		s.future[h] = i
	}
	return i, ok
}

// undense moves the dense entries to future, each under its chain hash at its index.
func (s *ReuseSim) undense() {
	s.dense = false
	if s.future == nil {
		s.future = make(map[uint64]int32, len(s.chainOf))
	}
	for id, h := range s.chainOf {
		if h != 0 {
			s.future[h] = int32(id)
		}
	}
	s.chainOf = nil // the map holds them now
}

// newEntry appends an entry to count (and, with runs, a run) and returns its index.
func (s *ReuseSim) newEntry() int32 {
	s.count = append(s.count, 0)
	if s.runs != nil {
		s.runs.addRun()
	}
	return int32(len(s.count) - 1)
}

// known returns how many prompt tokens the hash ids identify.
func (s *ReuseSim) known(isl int, chain []uint64) int {
	return min(isl, len(chain)*s.cfg.HashBlock)
}

func (s *ReuseSim) addVLLM(isl, osl int, chain []uint64) int {
	bs, hb, p := s.cfg.BlockSize, s.cfg.HashBlock, s.pool
	known := s.known(isl, chain)
	// block i, when full and identified (V-R8: only full blocks are hashed), is slot
	// i − ⌊k·hb/bs⌋ of hash id k, the one its last token falls in
	slot := func(i int) (k int, off int32, ok bool) {
		end := (i + 1) * bs
		if end > known {
			return 0, 0, false
		}
		k = (end - 1) / hb
		return k, int32(i - k*hb/bs), true
	}
	blockHash := func(k, i int) uint64 { return mix64(chain[k] ^ uint64(i+1)) }
	s.table = s.table[:0]
	hit := 0
	for i := 0; (i+1)*bs <= isl-1; i++ { // max_hit = num_tokens − 1
		k, off, ok := slot(i)
		if !ok {
			break
		}
		var b int32
		if s.runs != nil {
			b = s.runs.lookup(s.run[k], off)
		} else {
			b = p.lookup(blockHash(k, i))
		}
		if b < 0 {
			break
		}
		p.touch(b)
		s.table = append(s.table, b)
		hit += bs
	}
	total := (isl + osl + bs - 1) / bs
	for i := len(s.table); i < total && p.nfree > 0; i++ {
		b := p.popHead()
		if p.hashed[b] {
			if s.runs != nil {
				s.runs.evict(p, b)
			} else {
				p.evict(b)
			}
		}
		p.ref[b] = 1
		// A block of content unique to this request (its unidentified prompt tail or
		// its output) is cached by vLLM but never hit by another request: leaving it
		// unregistered is the same (it takes its place in the free queue either way,
		// and evicting it frees nothing anyone could hit).
		if k, off, ok := slot(i); ok && (i+1)*bs <= isl && s.live[k] {
			if s.runs != nil {
				s.runs.register(p, b, s.run[k], off)
			} else {
				p.register(b, blockHash(k, i))
			}
		}
		s.table = append(s.table, b)
	}
	return hit // the caller frees s.table in reverse order (§2.5), now or at finish
}

func (s *ReuseSim) addTree(isl, osl int, chain []uint64) int {
	bs, hb, t := s.cfg.BlockSize, s.cfg.HashBlock, s.tree
	known := s.known(isl, chain)
	units := func(tokens int) int64 { return int64((tokens + bs - 1) / bs) }
	t.path = t.path[:0]
	parent := int32(-1)
	matched := 0
	k := 0
	for ; k < len(chain) && k*hb < known; k++ {
		n, ok := t.index[chain[k]]
		if !ok {
			break
		}
		tok := min(hb, known-k*hb)
		t.path = append(t.path, n)
		parent = n
		matched += min(int(t.tokens[n]), tok)
		if int(t.tokens[n]) < tok {
			k++
			break
		}
	}
	for _, n := range t.path { // in use by this request: pinned, not evictable
		t.pin(n)
	}
	hit := min(matched, isl-1)
	if s.cfg.Backend == engine.SGLang {
		hit = hit / bs * bs // page granularity
	}
	// insert the rest of the identified prompt, then the request's own tail
	for ; k < len(chain) && k*hb < known; k++ {
		tok := min(hb, known-k*hb)
		n, ok := t.insert(chain[k], parent, int32(tok), units(tok))
		if !ok {
			break
		}
		t.path = append(t.path, n)
		parent = n
	}
	if own := isl + osl - known; own > 0 && len(t.path) == len(chain) {
		if n, ok := t.insert(ownHash(s.seq, -1), parent, int32(min(own, 1<<30)), units(own)); ok {
			t.path = append(t.path, n)
		}
	}
	return hit // the caller unpins t.path deepest first, now or at finish
}

// reuseTree is a prefix tree of hash blocks with LRU eviction of leaves. The LRU list
// is kept so that its head is always a leaf: a request's path is pushed to the MRU end
// deepest node first, so a parent is always more recent than its children.
type reuseTree struct {
	index  map[uint64]int32
	key    []uint64
	parent []int32
	kids   []int32
	tokens []int32
	units  []int64
	ref    []int32 // requests pinning the node; a pinned node is out of the LRU list
	prev   []int32
	next   []int32
	free   []int32
	head   int32
	tail   int32
	used   int64
	cap    int64
	path   []int32
}

func newReuseTree(capUnits int64) *reuseTree {
	return &reuseTree{index: map[uint64]int32{}, head: -1, tail: -1, cap: capUnits}
}

func (t *reuseTree) unlink(n int32) {
	pr, nx := t.prev[n], t.next[n]
	if pr >= 0 {
		t.next[pr] = nx
	} else {
		t.head = nx
	}
	if nx >= 0 {
		t.prev[nx] = pr
	} else {
		t.tail = pr
	}
	t.prev[n], t.next[n] = -1, -1
}

func (t *reuseTree) pushTail(n int32) {
	t.prev[n], t.next[n] = t.tail, -1
	if t.tail >= 0 {
		t.next[t.tail] = n
	} else {
		t.head = n
	}
	t.tail = n
}

// pin takes a reference on n: a pinned node leaves the LRU list (it is not
// evictable). A request pins its whole path from the root, so an unpinned node has
// no pinned descendant and the LRU head is always a leaf.
func (t *reuseTree) pin(n int32) {
	if t.ref[n] == 0 {
		t.unlink(n)
	}
	t.ref[n]++
}

// unpin drops a reference; a node reaching 0 goes to the MRU end (a path is unpinned
// deepest first, so a parent is more recent than its children).
func (t *reuseTree) unpin(n int32) {
	t.ref[n]--
	if t.ref[n] == 0 {
		t.pushTail(n)
	}
}

// insert adds a node under parent, pinned by the current request, evicting LRU
// leaves (none is pinned) to make room; false when it does not fit.
func (t *reuseTree) insert(h uint64, parent int32, tokens int32, units int64) (int32, bool) {
	if units > t.cap {
		return -1, false
	}
	for t.used+units > t.cap {
		v := t.head
		if v < 0 {
			return -1, false
		}
		t.evict(v)
	}
	var n int32
	if l := len(t.free); l > 0 {
		n, t.free = t.free[l-1], t.free[:l-1]
	} else {
		n = int32(len(t.key))
		t.key = append(t.key, 0)
		t.parent = append(t.parent, 0)
		t.kids = append(t.kids, 0)
		t.tokens = append(t.tokens, 0)
		t.units = append(t.units, 0)
		t.ref = append(t.ref, 0)
		t.prev = append(t.prev, -1)
		t.next = append(t.next, -1)
	}
	t.key[n], t.parent[n], t.kids[n], t.tokens[n], t.units[n], t.ref[n] = h, parent, 0, tokens, units, 1
	if parent >= 0 {
		t.kids[parent]++
	}
	t.index[h] = n
	t.used += units
	return n, true
}

// evict drops leaf v.
func (t *reuseTree) evict(v int32) {
	t.unlink(v)
	delete(t.index, t.key[v])
	if p := t.parent[v]; p >= 0 {
		t.kids[p]--
	}
	t.used -= t.units[v]
	t.free = append(t.free, v)
}

// ReuseRequest is one request of ReusePinned: when it runs and what it holds.
// ArrivalMs is when it looks its prefix up, stores its prompt and starts holding
// KV — its admission rather than its arrival when it queued (trace replays pass the
// first replay's first-token instant) —, FinishMs when it frees its KV.
type ReuseRequest struct {
	ArrivalMs, FinishMs float64
	ISL, OSL            int
	HashIDs             []int64
}

// ReusePinned replays reqs through a new cache with each request pinning its KV from
// its ArrivalMs (its admission, ReuseRequest) to finish (AddAt, in that order, ties in
// input order; every request is announced first, as Expect) and returns each
// request's hit, in input order. The run times come from a replay that took its hits
// unpinned (Add): the hits then account for the KV that running requests hold, as
// the engines' caches do.
func ReusePinned(cfg ReuseConfig, reqs []ReuseRequest) ([]int, error) {
	s, err := NewReuse(cfg)
	if err != nil {
		return nil, err
	}
	return s.Pinned(reqs)
}

// Pinned is ReusePinned on s's configuration, reusing s's memory (its block pool or
// tree, hash tables and buffers): s is first emptied, as NewReuse built it, so the
// hits are ReusePinned's bit for bit; s's earlier state is lost.
func (s *ReuseSim) Pinned(reqs []ReuseRequest) ([]int, error) {
	s.reset()
	order := make([]int, len(reqs))
	for i, r := range reqs {
		if math.IsNaN(r.ArrivalMs) || math.IsNaN(r.FinishMs) || r.FinishMs < r.ArrivalMs {
			return nil, fmt.Errorf("reuse request %d: runs %v..%v ms: want finite times, finish ≥ arrival", i, r.ArrivalMs, r.FinishMs)
		}
		order[i] = i
		s.Expect(r.HashIDs)
	}
	sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].ArrivalMs < reqs[order[b]].ArrivalMs })
	hits := make([]int, len(reqs))
	for _, i := range order {
		r := reqs[i]
		hits[i] = s.AddAt(r.ArrivalMs, r.FinishMs, r.ISL, r.OSL, r.HashIDs)
	}
	return hits, nil
}

// reset empties s as NewReuse built it, keeping its memory: the pool (or tree) holds
// nothing, no request is held or expected, the request counter restarts.
func (s *ReuseSim) reset() {
	s.seq = 0
	for _, h := range s.held {
		s.recycle(h.units)
	}
	s.held = s.held[:0]
	clear(s.future) // keeps the map's buckets for the next Expect calls
	s.count = s.count[:0]
	s.expected = false
	s.dense, s.chainOf = s.runs != nil, s.chainOf[:0]
	if s.pool != nil {
		s.pool.reset()
		if s.runs != nil {
			s.runs.reset()
		}
	} else {
		s.tree = newReuseTree(s.tree.cap)
	}
}

// KVBoundUtil is the peak KV utilisation of running requests above which a replay is
// KV-bound: `trace replay` and the replay gate then recompute the hits with running
// requests pinning their KV (ReusePinned); below it the pinned KV leaves over half
// the pool to the cache and the hits released at once stand (one replay, not two).
const KVBoundUtil = 0.5
