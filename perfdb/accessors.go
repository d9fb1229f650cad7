package perfdb

// Estimator returns the estimator p prices passes with (for callers that also
// need its memory model, e.g. the disaggregated tandem's KV sizing).
func (p *PassTiming) Estimator() *Estimator { return p.e }

// System returns the GPU system e prices on.
func (e *Estimator) System() *System { return e.sys }
