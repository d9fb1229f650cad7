package oracle

// initBackend prepares backend-specific state.
func (s *Sim) initBackend() { s.rules.init(s) }

// schedule forms the next pass for the configured backend.
func (s *Sim) schedule(pb *passBuf) { s.rules.schedule(s, pb) }

// update applies the outputs of a finished pass.
func (s *Sim) update(pb *passBuf) { s.rules.update(s, pb) }

func (s *Sim) waitingLen() int        { return s.waiting.len() }
func (s *Sim) waitingHead() int32     { return s.waiting.at(0) }
func (s *Sim) enqueueArrival(r int32) { s.waiting.pushBack(r) }
