package oracle

// Prefix-cache bookkeeping on top of blockPool. Blocks whose content other requests
// can share live in the hash table (hash → first registered block, duplicates
// chained); blocks whose content is unique to one request (a suffix of its blocks)
// are chained per (request, block index), which answers exactly the same lookups —
// only that request, after a preemption, can ask for them — without hashing.

// popBlock takes the head of the free queue for a new allocation: a cached block
// loses its registration here (lazy eviction) and gets ref_cnt 1.
func (s *Sim) popBlock() int32 {
	b := s.pool.popHead()
	if s.pool.hashed[b] {
		s.evictBlock(b)
	}
	s.pool.ref[b] = 1
	return b
}

// lookupBlock returns the first registered block holding block i of request ri's
// tokens, or -1.
func (s *Sim) lookupBlock(ri int32, i int) int32 {
	r := &s.reqs[ri]
	if r.inTable(i) || s.allHashed {
		s.ensureHashBuf(r)
		r.ensureHashes(i+1, s.bs)
		return s.pool.lookup(r.hashes[i])
	}
	if j := i - r.nGlob; j < len(r.uHead) {
		return r.uHead[j]
	}
	return -1
}

// registerBlock publishes b as block i of request ri's tokens.
func (s *Sim) registerBlock(ri int32, i int, b int32) {
	r := &s.reqs[ri]
	p := s.pool
	if r.inTable(i) || s.allHashed {
		s.ensureHashBuf(r)
		r.ensureHashes(i+1, s.bs)
		p.register(b, r.hashes[i])
		return
	}
	j := i - r.nGlob
	if r.uHead == nil {
		r.uHead = make([]int32, (r.p+r.maxTokens)/s.bs+2-r.nGlob)
		for k := range r.uHead {
			r.uHead[k] = -1
		}
	}
	p.hashed[b] = true
	p.owner[b], p.oidx[b] = ri, int32(j)
	p.dupNext[b] = -1
	if r.uHead[j] < 0 {
		r.uHead[j] = b
		return
	}
	x := r.uHead[j]
	for p.dupNext[x] >= 0 {
		x = p.dupNext[x]
	}
	p.dupNext[x] = b
}

// evictBlock drops b's registration.
func (s *Sim) evictBlock(b int32) {
	p := s.pool
	o := p.owner[b]
	if o < 0 {
		p.evict(b)
		return
	}
	r := &s.reqs[o]
	j := p.oidx[b]
	if r.uHead[j] == b {
		r.uHead[j] = p.dupNext[b]
	} else {
		for x := r.uHead[j]; x >= 0; x = p.dupNext[x] {
			if p.dupNext[x] == b {
				p.dupNext[x] = p.dupNext[b]
				break
			}
		}
	}
	p.dupNext[b] = -1
	p.hashed[b] = false
	p.owner[b] = -1
}

// dropOwnBlocks unregisters the blocks cached under finished request ri's own suffix
// chain (Options.SummaryOnly) and frees the chain heads: only ri could ever hit them,
// so they stay in the free queue, in place, as plain free blocks — the same free
// queue and the same hits, without the per-request chain kept for the whole run.
func (s *Sim) dropOwnBlocks(ri int32) {
	r := &s.reqs[ri]
	p := s.pool
	for _, b := range r.uHead {
		for b >= 0 {
			nx := p.dupNext[b]
			p.dupNext[b], p.hashed[b], p.owner[b] = -1, false, -1
			b = nx
		}
	}
	r.uHead = nil
}

// ensureTable gives request ri a recycled block table before its first allocation
// (Options.SummaryOnly).
func (s *Sim) ensureTable(ri int32) {
	if r := &s.reqs[ri]; r.table == nil && s.opt.SummaryOnly {
		r.table = s.bufs.takeTable()
	}
}

// ensureHashBuf gives r a recycled hash array before its first block hash
// (Options.SummaryOnly).
func (s *Sim) ensureHashBuf(r *req) {
	if r.hashes == nil && s.opt.SummaryOnly {
		r.hashes = s.bufs.takeHashes()
	}
}

// reqBufs recycles the block tables and hash arrays of finished requests (LIFO, so
// deterministic): a long trace then allocates them for the requests in flight only.
type reqBufs struct {
	tables [][]int32
	hashes [][]uint64
}

func (b *reqBufs) put(t []int32, h []uint64) {
	if cap(t) > 0 {
		b.tables = append(b.tables, t[:0])
	}
	if cap(h) > 0 {
		b.hashes = append(b.hashes, h[:0])
	}
}

func (b *reqBufs) takeTable() []int32 {
	n := len(b.tables)
	if n == 0 {
		return nil
	}
	t := b.tables[n-1]
	b.tables = b.tables[:n-1]
	return t
}

func (b *reqBufs) takeHashes() []uint64 {
	n := len(b.hashes)
	if n == 0 {
		return nil
	}
	h := b.hashes[n-1]
	b.hashes = b.hashes[:n-1]
	return h
}
