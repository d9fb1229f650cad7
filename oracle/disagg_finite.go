package oracle

import (
	"context"

	"github.com/aicdb/aicdb/queueing"
)

// RunFiniteLoop simulates the finite benchmark run fl on the disaggregated
// deployment, with the aggregated driver's semantics (Sim.RunFiniteLoop,
// queueing.FiniteRun): min(Clients, Requests) requests sent at 0 reach the
// router queueing.FiniteAdmitGapMs apart, first come first served, and each
// completion sends one more — TurnaroundMs + ClientRTTMs later, on the finishing
// client — until Requests have been sent. Every request is measured.
// DisaggResult.Requests are in creation order, with Client and Generation.
func (d *DisaggSim) RunFiniteLoop(ctx context.Context, fl FiniteLoop) (*DisaggResult, error) {
	if err := d.validShape(&fl.Shape); err != nil {
		return nil, err
	}
	if err := fl.validateCounts(); err != nil {
		return nil, err
	}
	d.total = fl.Requests
	cs := clientSends{d: d, sh: &fl.Shape, sent: make([]int, fl.Clients)}
	var adm queueing.FiniteAdmission // sends are made in time order
	for c := 0; c < min(fl.Clients, fl.Requests); c++ {
		cs.send(c, adm.At(0))
	}
	d.onDone = func(ri int32, t float64) {
		if cs.created < fl.Requests {
			cs.send(d.recs[ri].Client, adm.At(t+fl.TurnaroundMs+fl.ClientRTTMs))
		}
	}
	if err := d.loop(ctx, func() bool { return d.fin == fl.Requests || cs.err != nil }); err != nil {
		return nil, err
	}
	if cs.err != nil {
		return nil, cs.err
	}
	return d.result(), nil
}

// RunOpenRun simulates one path of the open finite run or on the disaggregated
// deployment, with the aggregated driver's semantics (Sim.RunOpenRun,
// queueing.OpenSends): sends reach the router at their instants, at most the
// run's bound in flight, queueing.FiniteAdmitGapMs apart when sent together.
// Every request is measured; records carry client 0 and their send order.
func (d *DisaggSim) RunOpenRun(ctx context.Context, or OpenRun) (*DisaggResult, error) {
	if err := d.validShape(&or.Shape); err != nil {
		return nil, err
	}
	sends, err := or.sends()
	if err != nil {
		return nil, err
	}
	d.total = or.Run.Requests
	cs := clientSends{d: d, sh: &or.Shape, sent: make([]int, 1)}
	completed := sends.Drive(0, func(at float64) { cs.send(0, at) })
	d.onDone = func(ri int32, t float64) { completed(t) }
	if err := d.loop(ctx, func() bool { return d.fin == or.Run.Requests || cs.err != nil }); err != nil {
		return nil, err
	}
	if cs.err != nil {
		return nil, cs.err
	}
	return d.result(), nil
}
