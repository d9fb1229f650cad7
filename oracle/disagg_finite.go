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
	created, sent := 0, make([]int, fl.Clients)
	var drawErr error
	var adm queueing.FiniteAdmission // sends are made in time order
	spawn := func(c int, at float64) {
		at = adm.At(at)
		isl, osl, err := fl.draw(created)
		if err != nil && drawErr == nil {
			drawErr = err
		}
		created++
		d.schedule(darr{t: at, client: c, gen: sent[c], isl: isl, osl: osl})
		sent[c]++
	}
	for c := 0; c < min(fl.Clients, fl.Requests); c++ {
		spawn(c, 0)
	}
	d.onDone = func(ri int32, t float64) {
		if created < fl.Requests {
			spawn(d.recs[ri].Client, t+fl.TurnaroundMs+fl.ClientRTTMs)
		}
	}
	if err := d.loop(ctx, func() bool { return d.fin == fl.Requests || drawErr != nil }); err != nil {
		return nil, err
	}
	if drawErr != nil {
		return nil, drawErr
	}
	return d.result(), nil
}
