package oracle

// status of a simulated request.
type status uint8

const (
	stPending  status = iota // not yet arrived
	stWaiting                // in the waiting queue (new or preempted)
	stRunning                // in the running list
	stFinished               // stopped (EOS or length); blocks freed
)

// req is the oracle's state of one request. Requests are addressed by their index in
// Sim.reqs (int32), never by pointer or map.
type req struct {
	id        string
	uid       uint64
	arrival   float64
	p         int // prompt length
	maxTokens int
	eosAt     int

	// token model: explicit prompt ids, or a shared prefix of sharedLen tokens of
	// group `group` followed by tokens unique to this request. Generated tokens are
	// unique per request and position.
	tokens    []int
	sharedLen int
	group     uint64
	// chain, when set, names the prompt's leading blocks of hashBlock tokens by the
	// hash of their id chain (a trace's hash ids, e.g. Mooncake's): equal chains are
	// equal content. The tokens after len(chain)·hashBlock are unique to r.
	chain     []uint64
	hashBlock int
	// sess, when non-zero, names the W4 session r is a turn of: r's blocks, generated
	// ones included, are shareable with the session's next turn, whose prompt starts
	// with r's prompt and outputs (it inherits r's block hashes for them, RunSessions).
	sess uint64

	g           int // output tokens appended
	c           int // num_computed_tokens (computed or scheduled)
	ph          int // async output placeholders (V-R11)
	hits        int // prefix-hit tokens at the current admission
	numCached   int // num_cached_tokens, set at first admission (-1 before)
	preemptions int
	gStart      int // TRT-LLM: outputs already generated when its context (re)started
	steps       int // MTP (TRT-LLM, SGLang EAGLE, vLLM): decode steps scheduled (engine.StepTokens numbers them)
	spec        int // vLLM MTP: spec_token_ids, the drafts (or async placeholders) the next step schedules (V-S1)

	table     []int32  // block table
	nCachedBl int      // blocks of table registered in the prefix cache
	hashes    []uint64 // hashes of the leading shared-content full blocks (V-R8)
	nGlob     int      // leading full blocks whose content other requests can share
	uHead     []int32  // per block index ≥ nGlob: first registered block of this content, -1 = none

	tokTimes []float64 // every output token's time (not with Options.SummaryOnly)
	nTok     int       // output tokens emitted
	firstTok float64   // first and last output token times
	lastTok  float64
	finish   float64
	client   int32  // closed-loop client, -1 otherwise
	st       status // beside client: no padding
}

// numTokens is P + g (V-R2): prompt plus outputs appended so far.
func (r *req) numTokens() int { return r.p + r.g }

// Hash tags keep the content classes apart.
const (
	tagTok    = 0x746f6b656e000001
	tagShared = 0x7368617265000002
	tagUnique = 0x756e697175000003
	tagGen    = 0x67656e6572000004
)

// mix folds x into h (a 64-bit multiply-xorshift; collisions between distinct block
// contents are possible in principle at ~2^-64 per pair and are ignored).
func mix(h, x uint64) uint64 {
	h ^= x + 0x9E3779B97F4A7C15 + (h << 6) + (h >> 2)
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 31
	h *= 0x94D049BB133111EB
	h ^= h >> 29
	return h
}

// blockHash is hash_i = H(hash_{i-1}, tokens of block i) (V-R8). Blocks whose content
// is unique to one request (its own prompt tokens or any generated token) hash their
// (request, index) identity, which is equivalent for equality and O(1).
func (r *req) blockHash(i, bs int, parent uint64) uint64 {
	start, end := i*bs, (i+1)*bs
	switch {
	case end > r.p:
		return mix(mix(mix(parent, tagGen), r.uid), uint64(i))
	case r.tokens != nil:
		h := mix(parent, tagTok)
		for _, t := range r.tokens[start:end] {
			h = mix(h, uint64(t))
		}
		return h
	case r.chain != nil && end <= r.chainLen():
		return mix(mix(mix(parent, tagShared), r.chain[(end-1)/r.hashBlock]), uint64(i))
	case end <= r.sharedLen:
		return mix(mix(mix(parent, tagShared), r.group), uint64(i))
	default:
		return mix(mix(mix(parent, tagUnique), r.uid), uint64(i))
	}
}

// sharedBlocks is the number of leading full blocks whose content other requests
// can have: explicit prompt tokens, or the shared prefix. Every later block holds a
// token unique to r (its own prompt tokens or a generated one), so it forms a suffix.
func (r *req) sharedBlocks(bs int) int {
	if r.tokens != nil {
		return r.p / bs
	}
	if r.chain != nil {
		return r.chainLen() / bs
	}
	return min(r.sharedLen, r.p) / bs
}

// chainLen is the number of prompt tokens the hash-id chain names.
func (r *req) chainLen() int { return min(len(r.chain)*r.hashBlock, r.p) }

// inTable reports whether block i of r is published in the pool's hash table (content
// another request can hit) rather than in r's own suffix chain: the shareable leading
// blocks, and every block of a session turn (the session's later turns hit them).
func (r *req) inTable(i int) bool { return i < r.nGlob || r.sess != 0 }

// ensureHashes extends r.hashes to the first n full blocks.
func (r *req) ensureHashes(n, bs int) {
	if r.hashes == nil && n > 0 { // Options.SummaryOnly: sized at first use, once
		c := max(n, r.nGlob)
		if r.sess != 0 { // every full block of a session turn is hashed
			c = max(n, (r.p+r.maxTokens)/bs)
		}
		r.hashes = make([]uint64, 0, c)
	}
	for len(r.hashes) < n {
		i := len(r.hashes)
		var parent uint64
		if i > 0 {
			parent = r.hashes[i-1]
		}
		r.hashes = append(r.hashes, r.blockHash(i, bs, parent))
	}
}

// deque is a ring buffer of request indices: the vLLM FCFS waiting queue (arrivals at
// the tail, preempted requests at the head).
type deque struct {
	buf  []int32
	head int
	n    int
}

func (d *deque) len() int { return d.n }

func (d *deque) grow() {
	nb := make([]int32, max(16, 2*len(d.buf)))
	for i := 0; i < d.n; i++ {
		nb[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = nb, 0
}

func (d *deque) pushBack(x int32) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)%len(d.buf)] = x
	d.n++
}

func (d *deque) pushFront(x int32) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = x
	d.n++
}

func (d *deque) at(i int) int32 { return d.buf[(d.head+i)%len(d.buf)] }

func (d *deque) popFront() int32 {
	x := d.buf[d.head]
	d.head = (d.head + 1) % len(d.buf)
	d.n--
	return x
}

// remove deletes x (rare: a preempted request finishing from the waiting queue).
func (d *deque) remove(x int32) {
	for i := 0; i < d.n; i++ {
		if d.at(i) == x {
			for j := i; j > 0; j-- {
				d.buf[(d.head+j)%len(d.buf)] = d.buf[(d.head+j-1)%len(d.buf)]
			}
			d.head = (d.head + 1) % len(d.buf)
			d.n--
			return
		}
	}
}
