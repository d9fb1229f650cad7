package oracle

import "math"

// stepState is the engine loop's state between iterations, so the loop can be
// driven by Run or by an outside clock (Step).
type stepState struct {
	// mustPop: the iteration scheduled the batch queue full (or found nothing to
	// schedule) and must next complete the pass at the queue's head.
	mustPop    bool
	idleStreak int
	passCap    int // pass bound (0: not set)
}

// iterate runs one iteration of the engine loop — absorb arrivals and schedule a
// pass at the current time, or complete the pass at the head of the batch queue,
// or wait for the next arrival — unless that iteration would move the clock
// beyond limit. It reports whether it did anything; with limit = +Inf it reports
// false only when no work is left.
func (s *Sim) iterate(limit float64) (bool, error) {
	st := &s.step
	did := false
	if !st.mustPop {
		if s.sglRecv() {
			s.absorb()
		}
		if s.hasRequests() {
			pb := s.pushPass()
			s.schedule(pb)
			s.sglNoteBatch(pb)
			if s.fatal != nil {
				return false, s.fatal
			}
			if err := s.launch(pb); err != nil {
				return false, err
			}
			if s.qlen < s.depth && (len(pb.entries) > 0 || s.hasRequests()) {
				return true, nil
			}
			did = true
		} else {
			s.sglNoteBatch(nil) // no batch formed
			if s.qlen == 0 {
				s.rules.idle(s)
				if len(s.arrivals) == 0 {
					return false, nil
				}
				t := max(s.now, s.arrivals[0].t)
				if t > limit {
					return false, nil
				}
				s.now = t
				return true, nil
			}
		}
		st.mustPop = true
	}
	if max(s.now, s.inflight[s.qhead].end) > limit {
		return did, nil
	}
	st.mustPop = false
	pb := s.popPass()
	s.now = max(s.now, pb.end)
	s.update(pb)
	if len(pb.entries) == 0 && len(pb.preempted) == 0 && !s.workInFlight() {
		st.idleStreak++
		if st.idleStreak > 4 {
			if s.dis != nil && s.dis.held > 0 {
				s.dis.blocked, st.idleStreak = true, 0 // waits for a pull to free held KV
				return false, nil
			}
			return false, s.stuckError()
		}
	} else {
		st.idleStreak = 0
	}
	if s.nPasses > st.passCap {
		return false, errNoCompletion(s)
	}
	return true, nil
}

// NextEventMs returns when the engine next acts on its own: now when it can
// schedule (or has a pass queue to drain), the end of the pass it waits for, the
// next arrival when idle, or +Inf when it has no work.
func (s *Sim) NextEventMs() float64 {
	switch {
	case s.dis != nil && s.dis.blocked:
		return math.Inf(1)
	case s.step.mustPop:
		return max(s.now, s.inflight[s.qhead].end)
	case s.qlen > 0 || s.hasRequests() || (len(s.arrivals) > 0 && s.arrivals[0].t <= s.now):
		return s.now
	case len(s.arrivals) > 0:
		return s.arrivals[0].t
	}
	return math.Inf(1)
}

// Step runs the engine under an outside clock up to time t: every scheduling
// decision and pass completion at or before t, exactly as Run would make them
// (requests may be added between steps with Add, arriving at or after the last
// step). The pass bound is Options.MaxPasses (0: none).
func (s *Sim) Step(t float64) error {
	if s.step.passCap == 0 {
		s.step.passCap = math.MaxInt
		if s.opt.MaxPasses > 0 {
			s.step.passCap = s.opt.MaxPasses
		}
	}
	for {
		did, err := s.iterate(t)
		if err != nil {
			return err
		}
		if !did {
			return nil
		}
	}
}

// Now returns the engine's clock.
func (s *Sim) Now() float64 { return s.now }

// SetOnFinish sets the hook called when request r finishes at time t (for
// outside drivers; the closed-loop driver sets its own).
func (s *Sim) SetOnFinish(f func(r int32, t float64)) {
	s.onFinish = func(_ *Sim, r int32, t float64) { f(r, t) }
}
