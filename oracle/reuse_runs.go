package oracle

// runIndex is the vLLM reuse oracle's prefix-cache map (V-R8: block hash → the first
// block registered under it, duplicates chained in registration order). A vLLM block
// hash names the block's whole prefix; in a trace given as hash ids, block i is
// identified by the hash id k its last token falls in (its chain hash, ids 0..k) and by
// i itself. So the map is two-level: chain hash → run (an id the caller assigns per
// chain hash), and per run a slot per block that the hash id covers (at most
// ⌈HashBlock/BlockSize⌉). Runs get their slots when their first block is registered
// and give them back when their last is evicted (LIFO: deterministic), so the slots
// held are bounded by the pool, not the trace. A lookup or registration costs a slice
// index instead of a probe of a pool-wide hash table (one cache miss a block, the
// reuse oracle's largest cost); the hits are the same as keying by block hash.
type runIndex struct {
	width int32 // slots per run
	// slab holds the runs with a block registered, width + 1 entries each: how many
	// blocks are registered in it (duplicates included), then per slot the first
	// block registered there, -1 = none.
	slab  []int32
	base  []int32 // per run: its entries in slab, -1 = none held
	spare []int32 // slab offsets of released runs
}

func (x *runIndex) reset() {
	x.slab, x.base, x.spare = x.slab[:0], x.base[:0], x.spare[:0]
}

// addRun makes a new run id with nothing registered.
func (x *runIndex) addRun() int32 {
	x.base = append(x.base, -1)
	return int32(len(x.base) - 1)
}

// lookup returns the first block registered at slot off of run r, or -1.
func (x *runIndex) lookup(r, off int32) int32 {
	if r < 0 || x.base[r] < 0 {
		return -1
	}
	return x.slab[x.base[r]+1+off]
}

// runKey packs a block's run and slot for blockPool.hash.
func runKey(r, off int32) uint64 { return uint64(uint32(r))<<32 | uint64(uint32(off)) }

// register publishes block b of pool p at slot off of run r (after any block already
// there: the first registered stays the one a lookup returns).
func (x *runIndex) register(p *blockPool, b, r, off int32) {
	p.hash[b] = runKey(r, off)
	p.hashed[b] = true
	p.dupNext[b] = -1
	if x.base[r] < 0 {
		if l := len(x.spare); l > 0 {
			x.base[r], x.spare = x.spare[l-1], x.spare[:l-1]
		} else {
			x.base[r] = int32(len(x.slab))
			x.slab = append(x.slab, 0)
			for range x.width {
				x.slab = append(x.slab, -1)
			}
		}
	}
	x.slab[x.base[r]]++
	i := x.base[r] + 1 + off
	first := x.slab[i]
	if first < 0 {
		x.slab[i] = b
		return
	}
	for p.dupNext[first] >= 0 {
		first = p.dupNext[first]
	}
	p.dupNext[first] = b
}

// evict removes registered block b of pool p from the map.
func (x *runIndex) evict(p *blockPool, b int32) {
	r, off := int32(p.hash[b]>>32), int32(uint32(p.hash[b]))
	p.hashed[b] = false
	i := x.base[r] + 1 + off
	if first := x.slab[i]; first == b {
		x.slab[i] = p.dupNext[b]
	} else {
		for first >= 0 && p.dupNext[first] != b {
			first = p.dupNext[first]
		}
		if first >= 0 {
			p.dupNext[first] = p.dupNext[b]
		}
	}
	p.dupNext[b] = -1
	if x.slab[x.base[r]]--; x.slab[x.base[r]] == 0 { // every slot is -1 again
		x.spare = append(x.spare, x.base[r])
		x.base[r] = -1
	}
}
