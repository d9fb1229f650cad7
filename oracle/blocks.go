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
