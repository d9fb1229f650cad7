package oracle

// hashTab maps a block hash to the first block registered under it: open addressing
// with linear probing and backward-shift deletion, sized once for the pool (at most
// one entry per block), so it never grows or allocates after construction. Key 0 is
// the empty marker; stored keys are forced odd (one bit of the 64-bit hash is lost).
type hashTab struct {
	keys []uint64
	vals []int32
	mask uint64
}

func newHashTab(entries int) hashTab {
	n := 16
	for n < 2*entries {
		n <<= 1
	}
	return hashTab{keys: make([]uint64, n), vals: make([]int32, n), mask: uint64(n - 1)}
}

func key(h uint64) uint64 { return h | 1 }

func (t *hashTab) slot(k uint64) uint64 { return ((k * 0x9E3779B97F4A7C15) >> 17) & t.mask }

// get returns the value under h, or -1.
func (t *hashTab) get(h uint64) int32 {
	k := key(h)
	for i := t.slot(k); ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case k:
			return t.vals[i]
		case 0:
			return -1
		}
	}
}

// set stores v under h (inserting or overwriting).
func (t *hashTab) set(h uint64, v int32) {
	k := key(h)
	i := t.slot(k)
	for t.keys[i] != 0 && t.keys[i] != k {
		i = (i + 1) & t.mask
	}
	t.keys[i], t.vals[i] = k, v
}

// del removes h if present.
func (t *hashTab) del(h uint64) {
	if i, ok := t.find(h); ok {
		t.delAt(i) // backward-shift deletion keeps every probe chain intact
	}
}

// find returns the slot holding h, or the empty slot where it would go, and whether
// h is present.
func (t *hashTab) find(h uint64) (uint64, bool) {
	k := key(h)
	i := t.slot(k)
	for {
		switch t.keys[i] {
		case k:
			return i, true
		case 0:
			return i, false
		}
		i = (i + 1) & t.mask
	}
}

// delAt removes the entry at slot i (backward-shift deletion).
func (t *hashTab) delAt(i uint64) {
	for j := (i + 1) & t.mask; t.keys[j] != 0; j = (j + 1) & t.mask {
		home := t.slot(t.keys[j])
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.keys[i] = 0
}
