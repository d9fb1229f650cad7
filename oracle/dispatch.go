package oracle

import "fmt"

// initBackend prepares backend-specific state.
func (s *Sim) initBackend() {
	if s.eng.Backend == SGLang {
		s.sgl.chunked = -1
		s.sgl.ratio = sglInitRatio
	}
}

// checkBackend reports a configuration whose scheduler the oracle does not simulate.
func checkBackend(e *Engine) error {
	switch e.Backend {
	case VLLM:
		return nil
	case TRTLLM:
		return nil
	case SGLang:
		if e.AsyncScheduling {
			return fmt.Errorf("engine async_scheduling: the SGLang overlap scheduler is not simulated; set it to false")
		}
		return nil
	}
	return fmt.Errorf("engine backend = %q: must be vllm, sglang or trtllm", e.Backend)
}

// schedule forms the next pass for the configured backend.
func (s *Sim) schedule(pb *passBuf) {
	switch s.eng.Backend {
	case TRTLLM:
		s.scheduleTRT(pb)
	case SGLang:
		s.scheduleSGLang(pb)
	default:
		s.scheduleVLLM(pb)
	}
}

// update applies the outputs of a finished pass.
func (s *Sim) update(pb *passBuf) {
	switch s.eng.Backend {
	case TRTLLM:
		s.updateTRT(pb)
	case SGLang:
		s.updateSGLang(pb)
	default:
		s.updateVLLM(pb)
	}
}

func (s *Sim) waitingLen() int        { return s.waiting.len() }
func (s *Sim) waitingHead() int32     { return s.waiting.at(0) }
func (s *Sim) enqueueArrival(r int32) { s.waiting.pushBack(r) }
