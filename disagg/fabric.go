package disagg

import "math"

// fabric is the fluid KV-transfer network: every flow crosses two links (the
// sending worker's egress and the receiving worker's ingress) and concurrent flows
// share each link max-min fairly (progressive filling, recomputed whenever a flow
// joins or leaves). Flows join in time order; the clock only moves forward.
type fabric struct {
	now   float64
	caps  []float64 // bytes per ms, per link
	flows []flow
	dirty bool // rates need recomputing
	// scratch
	left  []float64
	count []int
}

type flow struct {
	id        int     // the request
	links     [2]int  // egress, ingress
	remaining float64 // bytes
	rate      float64 // bytes per ms
}

// add starts a flow of bytes over links at time t (≥ the fabric clock).
func (f *fabric) add(t float64, id int, links [2]int, bytes float64) {
	f.advance(t)
	f.flows = append(f.flows, flow{id: id, links: links, remaining: bytes})
	f.dirty = true
}

// advance drains every flow at its rate up to time t.
func (f *fabric) advance(t float64) {
	if t <= f.now {
		return
	}
	f.rates()
	dt := t - f.now
	for i := range f.flows {
		f.flows[i].remaining -= f.flows[i].rate * dt
	}
	f.now = t
}

// rates recomputes the max-min fair allocation when flows changed.
func (f *fabric) rates() {
	if !f.dirty {
		return
	}
	f.dirty = false
	n := len(f.caps)
	f.left = append(f.left[:0], f.caps...)
	if cap(f.count) < n {
		f.count = make([]int, n)
	}
	f.count = f.count[:n]
	for i := range f.count {
		f.count[i] = 0
	}
	for i := range f.flows {
		f.flows[i].rate = -1 // unfrozen
		for _, l := range f.flows[i].links {
			f.count[l]++
		}
	}
	for frozen := 0; frozen < len(f.flows); {
		// the bottleneck link: the smallest fair share among links with unfrozen flows
		best, share := -1, math.Inf(1)
		for l := 0; l < n; l++ {
			if f.count[l] > 0 {
				if s := f.left[l] / float64(f.count[l]); s < share {
					best, share = l, s
				}
			}
		}
		if best < 0 {
			break
		}
		for i := range f.flows {
			fl := &f.flows[i]
			if fl.rate >= 0 || (fl.links[0] != best && fl.links[1] != best) {
				continue
			}
			fl.rate = share
			frozen++
			for _, l := range fl.links {
				f.left[l] -= share
				f.count[l]--
			}
		}
	}
}

// next returns the completion time of the earliest-finishing flow (+Inf: none).
func (f *fabric) next() float64 {
	if len(f.flows) == 0 {
		return math.Inf(1)
	}
	f.rates()
	t := math.Inf(1)
	for i := range f.flows {
		if d := f.now + f.flows[i].remaining/f.flows[i].rate; d < t {
			t = d
		}
	}
	return math.Max(t, f.now)
}

// pop advances to t (a next() value) and removes the flows that complete there,
// appending their ids to done in flow-start order.
func (f *fabric) pop(t float64, done []int) []int {
	f.advance(t)
	// Rounding must not stall the clock: the earliest flow completes at t.
	first := -1
	for i := range f.flows {
		if first < 0 || f.flows[i].remaining/f.flows[i].rate < f.flows[first].remaining/f.flows[first].rate {
			first = i
		}
	}
	if first >= 0 {
		f.flows[first].remaining = 0
	}
	k := 0
	for _, fl := range f.flows {
		// A flow is done when what is left would take under a nanosecond.
		if fl.remaining <= fl.rate*1e-6 {
			done = append(done, fl.id)
			continue
		}
		f.flows[k] = fl
		k++
	}
	if k != len(f.flows) {
		f.flows = f.flows[:k]
		f.dirty = true
	}
	return done
}

// rateOf returns the current rate of the flow of request id (0 when none).
func (f *fabric) rateOf(id int) float64 {
	f.rates()
	for _, fl := range f.flows {
		if fl.id == id {
			return fl.rate
		}
	}
	return 0
}
