package oracle

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/queueing"
)

// FiniteLoop is a closed-loop benchmark run as `vllm bench serve --max-concurrency`
// and `aiperf profile --concurrency` run it (queueing.FiniteRun, identical
// semantics): Clients requests are sent at 0 to an idle engine (the burst; they
// reach it queueing.FiniteAdmitGapMs apart), and each completion sends one more request — TurnaroundMs + ClientRTTMs later, on the
// finishing client — until Requests have been sent in total. Every request is
// measured (the benchmark's statistics are over all of them). Unlike ClosedLoop,
// the count is global: a client whose requests finish early may send more than
// Requests/Clients of them.
type FiniteLoop struct {
	Shape
	Clients      int
	Requests     int
	TurnaroundMs float64
	ClientRTTMs  float64
}

// validateCounts checks the run's clients, request count and delays.
func (fl *FiniteLoop) validateCounts() error {
	switch {
	case fl.Clients <= 0:
		return fmt.Errorf("finite loop concurrency = %d: must be > 0", fl.Clients)
	case fl.Requests <= 0:
		return fmt.Errorf("finite loop requests = %d: must be > 0", fl.Requests)
	case fl.TurnaroundMs < 0 || math.IsNaN(fl.TurnaroundMs) || math.IsInf(fl.TurnaroundMs, 0):
		return fmt.Errorf("finite loop turnaround_ms = %v: must be a finite number ≥ 0", fl.TurnaroundMs)
	case fl.ClientRTTMs < 0 || math.IsNaN(fl.ClientRTTMs) || math.IsInf(fl.ClientRTTMs, 0):
		return fmt.Errorf("finite loop client_rtt_ms = %v: must be a finite number ≥ 0", fl.ClientRTTMs)
	}
	return nil
}

// RunFiniteLoop simulates the finite run. Result.Requests are in creation order;
// each record carries its Client and Generation (the client's request index).
func (s *Sim) RunFiniteLoop(ctx context.Context, fl FiniteLoop) (*Result, error) {
	if err := fl.Shape.validate(&s.eng); err != nil {
		return nil, err
	}
	if err := fl.validateCounts(); err != nil {
		return nil, err
	}
	if fl.Prewarm {
		s.prewarm(fl.Prefix)
	}
	s.reqs = make([]req, 0, fl.Requests)
	s.gen = make([]int32, 0, fl.Requests)
	sent := make([]int, fl.Clients)
	var drawErr error
	var adm queueing.FiniteAdmission // sends are made in time order
	spawn := func(c int, at float64) {
		at = adm.At(at)
		isl, osl, err := fl.draw(len(s.reqs))
		if err != nil {
			if drawErr == nil {
				drawErr = err
			}
			isl, osl = fl.ISL, fl.OSL
		}
		s.gen = append(s.gen, int32(sent[c]))
		s.add("", at, isl, nil, fl.Prefix, osl, 0, int32(c))
		sent[c]++
	}
	for c := 0; c < min(fl.Clients, fl.Requests); c++ {
		spawn(c, 0)
	}
	s.onFinish = func(s *Sim, ri int32, t float64) {
		if len(s.reqs) < fl.Requests {
			spawn(int(s.reqs[ri].client), t+fl.TurnaroundMs+fl.ClientRTTMs)
		}
	}
	s.opt.MaxPasses = max(s.opt.MaxPasses, 1000+4*fl.Requests*(fl.ISL+fl.OSL))
	res, err := s.Run(ctx)
	if drawErr != nil {
		return nil, drawErr
	}
	return res, err
}

// OpenRun is an open-loop benchmark run as `vllm bench serve --request-rate` and
// `aiperf profile --request-rate` run it (queueing.FiniteRun with Open, identical
// semantics; one path, Run.FirstPath, of queueing.OpenSends) — sends at the arrival instants of
// the run's rate (all at 0 at rate 0), at most MaxConcurrency in flight, a
// waiting request sent TurnaroundMs + ClientRTTMs after the completion that frees
// its seat — reaching the scheduler queueing.FiniteAdmitGapMs apart when sent
// together. Every request is measured; records carry client 0 and their send
// order as Generation.
type OpenRun struct {
	Shape
	Run          queueing.FiniteRun
	TurnaroundMs float64
	ClientRTTMs  float64
}

// sends checks or's counts and returns its send schedule: one path
// (Run.FirstPath), its lengths from Shape (a Run stating Shapes is refused: give
// them as Shape.Draw, as the gate does).
func (or OpenRun) sends() (*queueing.OpenSends, error) {
	fl := FiniteLoop{Clients: 1, Requests: or.Run.Requests, TurnaroundMs: or.TurnaroundMs, ClientRTTMs: or.ClientRTTMs}
	if err := fl.validateCounts(); err != nil {
		return nil, err
	}
	switch {
	case or.Run.Paths > 1:
		return nil, fmt.Errorf("open run paths = %d: the DES runs one path (Run.FirstPath)", or.Run.Paths)
	case or.Run.Shapes != "":
		return nil, fmt.Errorf("open run shapes %q: the DES draws lengths from its Shape; give them as Shape.Draw", or.Run.Shapes)
	}
	return queueing.NewOpenSends(or.Run, 0, or.TurnaroundMs+or.ClientRTTMs)
}

// RunOpenRun simulates one path of the open finite run.
func (s *Sim) RunOpenRun(ctx context.Context, or OpenRun) (*Result, error) {
	if err := or.Shape.validate(&s.eng); err != nil {
		return nil, err
	}
	sends, err := or.sends()
	if err != nil {
		return nil, err
	}
	if or.Prewarm {
		s.prewarm(or.Prefix)
	}
	s.reqs = make([]req, 0, or.Run.Requests)
	s.gen = make([]int32, 0, or.Run.Requests)
	var drawErr error
	completed := sends.Drive(0, func(at float64) {
		k := len(s.reqs)
		isl, osl, err := or.draw(k)
		if err != nil {
			if drawErr == nil {
				drawErr = err
			}
			isl, osl = or.ISL, or.OSL
		}
		s.gen = append(s.gen, int32(k))
		s.add("", at, isl, nil, or.Prefix, osl, 0, 0)
	})
	s.onFinish = func(s *Sim, ri int32, t float64) { completed(t) }
	s.opt.MaxPasses = max(s.opt.MaxPasses, 1000+4*or.Run.Requests*(or.ISL+or.OSL))
	res, err := s.Run(ctx)
	if drawErr != nil {
		return nil, drawErr
	}
	return res, err
}
