package oracle

import "math"

// kvFabric is the DES's fluid KV-transfer network, written independently of the
// tandem's (disagg/fabric.go) so that the gate compares two implementations: each
// transfer is a flow over two ports (the sender's egress, the receiver's ingress);
// the active flows share every port max-min fairly, the allocation being redone
// whenever a flow starts or ends; flows start in time order.
type kvFabric struct {
	clock float64
	ports []float64 // capacity, bytes per ms
	fl    []kvFlow
	fresh bool // rates match the current flow set

	resid []float64 // scratch: capacity not yet given out, per port
	users []int32   // scratch: unfixed flows per port
}

// kvFlow is one transfer in flight.
type kvFlow struct {
	req       int32 // DES request index
	out, in   int32 // ports
	bytesLeft float64
	bps       float64 // bytes per ms (−1 while the allocation is being computed)
}

// start adds a transfer of bytes from port out to port in at time t.
func (f *kvFabric) start(t float64, req int32, out, in int, bytes float64) {
	f.drain(t)
	f.fl = append(f.fl, kvFlow{req: req, out: int32(out), in: int32(in), bytesLeft: bytes})
	f.fresh = false
}

// drain moves the clock to t, every flow sending at its rate meanwhile.
func (f *kvFabric) drain(t float64) {
	if !(t > f.clock) {
		return
	}
	f.allocate()
	for i := range f.fl {
		f.fl[i].bytesLeft -= f.fl[i].bps * (t - f.clock)
	}
	f.clock = t
}

// allocate gives every flow its max-min fair rate by water filling: the port whose
// remaining capacity split over its unfixed flows is smallest fixes those flows at
// that share; repeat with the remaining ports and flows.
func (f *kvFabric) allocate() {
	if f.fresh {
		return
	}
	f.fresh = true
	f.resid = append(f.resid[:0], f.ports...)
	f.users = f.users[:0]
	for range f.ports {
		f.users = append(f.users, 0)
	}
	for i := range f.fl {
		f.fl[i].bps = -1
		f.users[f.fl[i].out]++
		f.users[f.fl[i].in]++
	}
	left := len(f.fl)
	for left > 0 {
		port, fair := -1, math.Inf(1)
		for p, n := range f.users {
			if n == 0 {
				continue
			}
			if s := f.resid[p] / float64(n); s < fair {
				port, fair = p, s
			}
		}
		for i := range f.fl {
			x := &f.fl[i]
			if x.bps >= 0 || (int(x.out) != port && int(x.in) != port) {
				continue
			}
			x.bps = fair
			left--
			f.resid[x.out] -= fair
			f.resid[x.in] -= fair
			f.users[x.out]--
			f.users[x.in]--
		}
	}
}

// next returns when the next flow completes (+Inf when none is active).
func (f *kvFabric) next() float64 {
	if len(f.fl) == 0 {
		return math.Inf(1)
	}
	f.allocate()
	best := math.Inf(1)
	for i := range f.fl {
		best = math.Min(best, f.clock+f.fl[i].bytesLeft/f.fl[i].bps)
	}
	return math.Max(best, f.clock)
}

// complete moves the clock to t (a value of next) and removes the flows done by
// then, appending their requests to out in start order.
func (f *kvFabric) complete(t float64, out []int32) []int32 {
	f.allocate()
	first, ft := -1, math.Inf(1)
	for i := range f.fl { // the flow next() reported completes at t whatever the rounding
		if d := f.fl[i].bytesLeft / f.fl[i].bps; d < ft {
			first, ft = i, d
		}
	}
	f.drain(t)
	// done: the bytes left would take under a nanosecond — the tandem's rule
	// (disagg/fabric.go, pop), so both sides group landings alike. Flows that finish
	// together in exact arithmetic must land in this one event: a second event at
	// the same instant would let a prefill worker schedule (ties go to the workers)
	// on the first landing's release alone, where its next schedule (V-R3) sees
	// both finished_sending releases (V-P3). The event times carry float drift
	// shared by both sides (5.6e-9 ms at t = 1.46 s, ~24,000 ulps of t, on
	// TestPropertyDisaggVLLMKVAgainstDES seed 13932306038080048875), above the
	// former 1e-12·t window and far above the drain's own rounding.
	tol := 1e-6
	k := 0
	for i := range f.fl {
		x := f.fl[i]
		if i == first || x.bytesLeft <= x.bps*tol {
			out = append(out, x.req)
			continue
		}
		f.fl[k] = x
		k++
	}
	if k != len(f.fl) {
		f.fl = f.fl[:k]
		f.fresh = false
	}
	return out
}

// rate returns the current rate of request req's flow (0: none).
func (f *kvFabric) rate(req int32) float64 {
	f.allocate()
	for _, x := range f.fl {
		if x.req == req {
			return x.bps
		}
	}
	return 0
}
