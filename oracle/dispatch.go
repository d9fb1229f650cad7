package oracle

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
)

// initBackend prepares backend-specific state.
func (s *Sim) initBackend() { s.rules.init(s) }

// checkBackend reports a configuration whose scheduler the oracle does not simulate
// (e has passed ValidateEngine, so its backend is registered): async scheduling on a
// backend without an overlap scheduler (SGLang's is not simulated).
func checkBackend(e *engine.Spec) error {
	if e.AsyncScheduling && !e.Traits().Overlap {
		return fmt.Errorf("engine async_scheduling: the SGLang overlap scheduler is not simulated; set it to false")
	}
	return nil
}

// schedule forms the next pass for the configured backend.
func (s *Sim) schedule(pb *passBuf) { s.rules.schedule(s, pb) }

// update applies the outputs of a finished pass.
func (s *Sim) update(pb *passBuf) { s.rules.update(s, pb) }

func (s *Sim) waitingLen() int        { return s.waiting.len() }
func (s *Sim) waitingHead() int32     { return s.waiting.at(0) }
func (s *Sim) enqueueArrival(r int32) { s.waiting.pushBack(r) }
