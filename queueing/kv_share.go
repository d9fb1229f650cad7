package queueing

import "fmt"

// Prefix blocks shared among running vLLM requests (trace replay with hash ids, a KV
// capacity and prefix caching). vLLM V1 holds a cached block once however many
// running requests use it: a block carries a ref_cnt, a prefix hit on a block whose
// ref_cnt > 0 takes no free block (allocate_slots counts only hit blocks with
// ref_cnt == 0 — revived from the free queue — against the free blocks, V-R9), and
// a finished or preempted request's block returns to the free queue only when its
// ref_cnt drops to 0 (V-R6, V-R7). The DES (oracle/) models this with its block
// pool; here the calendar, which counts blocks rather than naming them, keeps a
// reference count per shareable block content so that such a block is counted once
// in the pool while any running request holds it.
//
// A block's content is named as the DES names it (oracle.SharedPrefix): full block i
// of a prompt whose last token falls in hash block k (HashBlock tokens each) is
// (the chain of ids 0..k, i). Only chains that two or more requests of the trace
// name are tracked: a block no other request can name is never shared (a request's
// own recompute re-takes it after releasing it).
//
// Per content the calendar keeps the number of running requests that reference its
// canonical block — the one a lookup returns: the first registered (V-R8) — and the
// request that computed it, if any. A request references the canonical block of
// each of its prefix hits (its cached prefix, whole blocks, is what the engine finds
// at admission), and of a block it computes when no running request holds that
// content (it registers the block; V-R9 cache_blocks at schedule time). A block it
// computes while the content is already held is a duplicate of its own (vLLM
// computes it again only when the hit was not found; it is not the lookup's block).

// kvShare is the shared-block state of one replay (nil: nothing shared).
type kvShare struct {
	hb, bs int
	// chains[start[r]+k] is the id of request r's chain k (hash ids 0..k), for its
	// leading chains that another request of the trace names; keyed[r] is the
	// number of its leading full blocks in them (whose content another request can
	// name).
	chains []int32
	start  []int32
	keyed  []int32
	// The chains with a block held have a head (heads[base[c]]) and width slots
	// (slab[base[c]·width:], block i of chain k is slot i − ⌊k·hb/bs⌋); base[c] = −1:
	// nothing of chain c held. Released places are reused (spare, LIFO:
	// deterministic), so heads and slab are bounded by the pool, not the trace.
	base  []int32
	width int
	heads []chainHead
	slab  []shareSlot
	spare []int32
}

// chainHead is the state of a chain with a block held. While one request alone
// holds it (solo ≥ 0: the common case, a chain other requests name at other times)
// its slots lo..hi−1 are held by that request, canonical, and not written; a second
// request taking a block of the chain writes them out (solo −1) and the slots count
// per block from then on.
type chainHead struct {
	held   int32 // slots with ref > 0
	solo   int32
	lo, hi int32
}

// shareSlot is the state of one shareable block content.
type shareSlot struct {
	ref   int32 // running requests referencing the canonical block (0: not held)
	owner int32 // the request that computed it while it references it, or −1
}

// newKVShare builds the shared-block state of reqs (hash ids of hb-token blocks)
// for an engine of block size bs; nil when no two requests name a common chain.
func newKVShare(reqs []TraceRequest, hb, bs int) *kvShare {
	ids := func(r *TraceRequest) []int64 { // ids past the prompt name nothing of it
		return r.HashIDs[:min(len(r.HashIDs), (r.ISL+hb-1)/hb)]
	}
	n := 0
	for i := range reqs {
		n += len(ids(&reqs[i]))
	}
	if n == 0 {
		return nil
	}
	x := &kvShare{hb: hb, bs: bs, width: (hb+bs-1)/bs + 1, start: make([]int32, len(reqs)+1), keyed: make([]int32, len(reqs))}
	// Chain ids: a chain is (its parent chain, its last id). Trace ids name their
	// whole prefix as a rule, so a chain's id is its last hash id itself when the ids
	// are small (Mooncake's running numbers: no table) or a dense number given by
	// id (a map), and the parent is checked; an id met under another parent is a
	// chain of its own, numbered after the others.
	type link struct {
		parent int32
		id     int64
	}
	small, maxID := true, int64(0)
scan:
	for i := range reqs {
		for _, h := range ids(&reqs[i]) {
			if h < 0 || h >= 4*int64(n) {
				small = false
				break scan
			}
			maxID = max(maxID, h)
		}
	}
	const none = -2    // parent of a chain id not met yet
	var parent []int32 // per chain id
	var uses []uint8   // per chain id: requests naming it, up to 2
	var byID map[int64]int32
	if small {
		parent, uses = make([]int32, maxID+1), make([]uint8, maxID+1)
		for c := range parent {
			parent[c] = none
		}
	} else {
		byID = make(map[int64]int32, n/2)
	}
	var other map[link]int32
	// chain returns the id of chain (p, h), numbering it when new.
	chain := func(p int32, h int64) int32 {
		c := int32(h)
		if !small {
			var ok bool
			if c, ok = byID[h]; !ok {
				c = int32(len(parent))
				byID[h] = c
				parent, uses = append(parent, none), append(uses, 0)
			}
		}
		if parent[c] == none {
			parent[c] = p
		} else if parent[c] != p {
			if other == nil {
				other = map[link]int32{}
			}
			var ok bool
			if c, ok = other[link{p, h}]; !ok {
				c = int32(len(parent))
				other[link{p, h}] = c
				parent, uses = append(parent, p), append(uses, 0)
			}
		}
		return c
	}
	all := make([]int32, 0, n) // every request's chains in turn
	for i := range reqs {      // number them, counting the requests naming each
		p := int32(-1)
		for _, h := range ids(&reqs[i]) {
			p = chain(p, h)
			uses[p] = min(uses[p]+1, 2)
			all = append(all, p)
		}
	}
	// Keep each request's leading chains another request names, in place: a kept
	// chain is written at or before the place it is read from.
	x.chains = all[:0]
	shared, next := false, 0
	for i := range reqs {
		x.start[i] = int32(len(x.chains))
		own := all[next : next+len(ids(&reqs[i]))]
		next += len(own)
		m := 0 // whoever names a chain names its prefix: they lead
		for _, c := range own {
			if uses[c] < 2 {
				break
			}
			x.chains = append(x.chains, c)
			m++
		}
		x.keyed[i] = int32(min(m*hb, reqs[i].ISL) / bs)
		shared = shared || x.keyed[i] > 0
	}
	x.start[len(reqs)] = int32(len(x.chains))
	if !shared {
		return nil
	}
	x.base = parent // no longer needed: its memory holds base
	for c := range x.base {
		x.base[c] = -1
	}
	return x
}

// span returns the chain of request ri's block i and the block ending that chain's
// blocks (the first block of the next hash block); blocks i..end−1 of ri are slots
// i − first.. of the chain.
func (x *kvShare) span(ri int32, i int) (c int32, first, end int) {
	k := ((i+1)*x.bs - 1) / x.hb // the hash block of the block's last token
	return x.chains[int(x.start[ri])+k], k * x.hb / x.bs, (k + 1) * x.hb / x.bs
}

// slots returns chain c's head and slots (c held).
func (x *kvShare) slots(c int32) (*chainHead, []shareSlot) {
	b := int(x.base[c])
	return &x.heads[b], x.slab[b*x.width : (b+1)*x.width]
}

// hold gives chain c (nothing of it held) a head and slots, with request ri about
// to take its slots from off on alone.
func (x *kvShare) hold(c, ri int32, off int) {
	if l := len(x.spare); l > 0 {
		x.base[c], x.spare = x.spare[l-1], x.spare[:l-1]
	} else {
		x.base[c] = int32(len(x.heads))
		x.heads = append(x.heads, chainHead{})
		for range x.width {
			x.slab = append(x.slab, shareSlot{owner: -1})
		}
	}
	x.heads[x.base[c]] = chainHead{solo: ri, lo: int32(off), hi: int32(off)}
}

// release gives back chain c's place once nothing of it is held (every slot is
// ref 0, owner −1 again).
func (x *kvShare) release(c int32) {
	x.spare = append(x.spare, x.base[c])
	x.base[c] = -1
}

// writeOut writes the solo holder's slots of a chain (head h, slots sl) out: ref 1,
// owned by it when it computed the block (at or past its hit blocks hit, chain
// offset).
func writeOut(h *chainHead, sl []shareSlot, hitOff int) {
	for j := h.lo; j < h.hi; j++ {
		sl[j] = shareSlot{ref: 1, owner: -1}
		if int(j) >= hitOff {
			sl[j].owner = h.solo
		}
	}
	h.solo = -1
}

// hitBlocks is the number of leading blocks r finds cached at admission.
func (s *sim) hitBlocks(r *simReq) int { return r.prefix / s.e.BlockSize }

// kvShareHeld returns how many of request ri's blocks from..to−1 are prefix hits on
// a block some running request holds: they take no free block (V-R9).
func (s *sim) kvShareHeld(ri int32, from, to int) int {
	x := s.share
	to = min(to, int(x.keyed[ri]), s.hitBlocks(&s.reqs[ri]))
	n := 0
	for i := from; i < to; {
		c, first, end := x.span(ri, i)
		end = min(end, to)
		if x.base[c] >= 0 {
			h, sl := x.slots(c)
			if h.solo >= 0 { // lo..hi−1 held
				n += max(min(end-first, int(h.hi))-max(i-first, int(h.lo)), 0)
			} else {
				for _, q := range sl[i-first : end-first] {
					if q.ref > 0 {
						n++
					}
				}
			}
		}
		i = end
	}
	return n
}

// kvShareTake records that request ri took its blocks from..to−1: a hit references
// the canonical block (reviving it when nobody holds it), a computed block becomes
// the canonical one when nobody holds the content and is a private duplicate
// otherwise.
func (s *sim) kvShareTake(ri int32, from, to int) {
	x := s.share
	hit := s.hitBlocks(&s.reqs[ri])
	to = min(to, int(x.keyed[ri]))
	for i := from; i < to; {
		c, first, end := x.span(ri, i)
		end = min(end, to)
		if x.base[c] < 0 {
			x.hold(c, ri, i-first)
		}
		h, sl := x.slots(c)
		if h.solo == ri && int(h.hi) == i-first { // alone: every block canonical, its own
			h.hi = int32(end - first)
			h.held += int32(end - i)
			i = end
			continue
		}
		if h.solo >= 0 {
			writeOut(h, sl, s.hitBlocks(&s.reqs[h.solo])-first)
		}
		for j := i; j < end; j++ {
			q := &sl[j-first]
			switch {
			case j < hit:
				if q.ref == 0 {
					h.held++
				}
				q.ref++
			case q.ref == 0:
				q.ref, q.owner = 1, ri
				h.held++
			}
		}
		if h.held == 0 { // only duplicates: nothing of the chain held
			x.release(c)
		}
		i = end
	}
}

// kvShareDrop releases request ri's references (its blocks are being freed) and
// returns how many of its blocks stay held: canonical blocks another running
// request still references (V-R6/V-R7 free a block at ref_cnt 0 only).
func (s *sim) kvShareDrop(ri int32) int {
	x := s.share
	r := &s.reqs[ri]
	hit, kept := s.hitBlocks(r), 0
	to := min(r.blocks, int(x.keyed[ri]))
	for i := 0; i < to; {
		c, first, end := x.span(ri, i)
		end = min(end, to)
		from := i
		i = end
		if x.base[c] < 0 {
			continue // only private duplicates of ri in this chain
		}
		h, sl := x.slots(c)
		if h.solo >= 0 {
			if h.solo == ri { // its blocks alone: all freed
				x.release(c)
			}
			continue // another's alone: ri's are private duplicates
		}
		for j := from; j < end; j++ {
			q := &sl[j-first]
			if j >= hit && q.owner != ri {
				continue // not held by ri, or a private duplicate
			}
			if q.ref--; q.ref > 0 {
				kept++
			} else {
				h.held--
			}
			if q.owner == ri {
				q.owner = -1
			}
		}
		if h.held == 0 {
			x.release(c)
		}
	}
	return kept
}

// checkHashIDs validates the hash ids of a trace replay: they need the tokens one
// id covers. Ids past the prompt (more than ⌈isl / hb⌉) name nothing of it and are
// ignored, as by the reuse oracle.
func checkHashIDs(reqs []TraceRequest, hb int) error {
	if hb >= 1 {
		return nil
	}
	for i, r := range reqs {
		if len(r.HashIDs) > 0 {
			return fmt.Errorf("trace request %d: %d hash ids but options hash_block = %d: set the tokens one hash id covers (≥ 1)", i, len(r.HashIDs), hb)
		}
	}
	return nil
}
