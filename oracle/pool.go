package oracle

// blockPool is the vLLM v1 KV block pool (SCHEDULERS.md §2.4–2.5, V-R8/V-R9):
// num_gpu_blocks blocks of which block 0 is the null block (never handed out, so
// usable = num_gpu_blocks − 1), a free queue of every block with ref_cnt 0 in eviction
// order (head = next reused; both never-used and cached-but-unreferenced blocks), and a
// prefix-cache map from block hash to block(s), duplicates allowed.
//
// Everything is int32 arrays indexed by block id; no allocation after construction
// none at all (the hash table is sized for the pool).
type blockPool struct {
	n       int32
	ref     []int32
	prev    []int32 // free-queue links; -1 = none
	next    []int32
	inFree  []bool
	head    int32
	tail    int32
	nfree   int
	hash    []uint64
	hashed  []bool
	dupNext []int32 // next block with the same hash (insertion order), -1 = none
	// owner/oidx: for a block whose content is unique to one request (its own prompt
	// tokens or any generated token), the request and block index it is registered
	// under; such blocks are chained per request instead of in the hash table (only
	// that request can ever hit them). -1 = a hash-table block.
	owner   []int32
	oidx    []int32
	cached  hashTab // hash → first registered block with that hash
	caching bool
}

// newBlockPool builds a pool of numBlocks blocks; the free queue starts in id order
// (blocks 1..numBlocks−1; block 0 is the null block).
func newBlockPool(numBlocks int, caching bool) *blockPool {
	p := &blockPool{
		n:       int32(numBlocks),
		ref:     make([]int32, numBlocks),
		prev:    make([]int32, numBlocks),
		next:    make([]int32, numBlocks),
		inFree:  make([]bool, numBlocks),
		hash:    make([]uint64, numBlocks),
		hashed:  make([]bool, numBlocks),
		dupNext: make([]int32, numBlocks),
		owner:   make([]int32, numBlocks),
		oidx:    make([]int32, numBlocks),
		head:    -1,
		tail:    -1,
		caching: caching,
	}
	if caching {
		p.cached = newHashTab(numBlocks)
	}
	p.reset()
	return p
}

// reset returns the pool to its built state (every block free in id order, nothing
// cached) without allocating.
func (p *blockPool) reset() {
	clear(p.ref)
	clear(p.inFree)
	clear(p.hash)
	clear(p.hashed)
	clear(p.oidx)
	clear(p.cached.keys)
	clear(p.cached.vals)
	p.head, p.tail, p.nfree = -1, -1, 0
	for i := range p.dupNext {
		p.dupNext[i] = -1
		p.owner[i] = -1
		p.prev[i] = -1
		p.next[i] = -1
	}
	for b := int32(1); b < p.n; b++ {
		p.appendFree(b)
	}
}

// appendFree puts b at the tail of the free queue (most recently freed, evicted last).
func (p *blockPool) appendFree(b int32) {
	p.prev[b] = p.tail
	p.next[b] = -1
	if p.tail >= 0 {
		p.next[p.tail] = b
	} else {
		p.head = b
	}
	p.tail = b
	p.inFree[b] = true
	p.nfree++
}

// removeFree unlinks b from the free queue.
func (p *blockPool) removeFree(b int32) {
	pr, nx := p.prev[b], p.next[b]
	if pr >= 0 {
		p.next[pr] = nx
	} else {
		p.head = nx
	}
	if nx >= 0 {
		p.prev[nx] = pr
	} else {
		p.tail = pr
	}
	p.prev[b], p.next[b] = -1, -1
	p.inFree[b] = false
	p.nfree--
}

// popHead unlinks the head of the free queue (the caller evicts and references it).
func (p *blockPool) popHead() int32 {
	b := p.head
	p.removeFree(b)
	return b
}

// touch takes a reference on a prefix-hit block, removing it from the free queue if it
// was unreferenced (it is no longer evictable).
func (p *blockPool) touch(b int32) {
	if p.ref[b] == 0 {
		p.removeFree(b)
	}
	p.ref[b]++
}

// release drops one reference; a block reaching 0 goes to the free-queue tail with its
// hash kept (it stays a prefix-cache hit until evicted).
func (p *blockPool) release(b int32) {
	p.ref[b]--
	if p.ref[b] == 0 {
		p.appendFree(b)
	}
}

// lookup returns the first registered block with hash h, or -1.
func (p *blockPool) lookup(h uint64) int32 {
	return p.cached.get(h)
}

// register publishes b under hash h (duplicates allowed; the first one registered is
// the one a lookup returns).
func (p *blockPool) register(b int32, h uint64) {
	p.hash[b] = h
	p.hashed[b] = true
	p.dupNext[b] = -1
	i, ok := p.cached.find(h)
	if !ok {
		p.cached.keys[i], p.cached.vals[i] = key(h), b
		return
	}
	first := p.cached.vals[i]
	for p.dupNext[first] >= 0 {
		first = p.dupNext[first]
	}
	p.dupNext[first] = b
}

// evict removes b from the prefix-cache map.
func (p *blockPool) evict(b int32) {
	h := p.hash[b]
	p.hashed[b] = false
	i, ok := p.cached.find(h)
	if !ok {
		p.dupNext[b] = -1
		return
	}
	first := p.cached.vals[i]
	if first == b {
		if p.dupNext[b] >= 0 {
			p.cached.vals[i] = p.dupNext[b]
		} else {
			p.cached.delAt(i)
		}
	} else {
		for first >= 0 && p.dupNext[first] != b {
			first = p.dupNext[first]
		}
		if first >= 0 {
			p.dupNext[first] = p.dupNext[b]
		}
	}
	p.dupNext[b] = -1
}
