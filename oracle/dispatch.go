package oracle

import "fmt"

// initBackend prepares backend-specific state.
func (s *Sim) initBackend() {}

// checkBackend reports a backend whose core is not built.
func checkBackend(e *Engine) error {
	if e.Backend != VLLM {
		return fmt.Errorf("engine backend = %q: the oracle simulates only vllm so far", e.Backend)
	}
	return nil
}

// schedule forms the next pass for the configured backend.
func (s *Sim) schedule(pb *passBuf) { s.scheduleVLLM(pb) }

// update applies the outputs of a finished pass.
func (s *Sim) update(pb *passBuf) { s.updateVLLM(pb) }

func (s *Sim) waitingLen() int        { return s.waiting.len() }
func (s *Sim) waitingHead() int32     { return s.waiting.at(0) }
func (s *Sim) enqueueArrival(r int32) { s.waiting.pushBack(r) }
