package oracle

// sglInitRatio is SGLang's initial new_token_ratio (0.7 × schedule_conservativeness).
const sglInitRatio = 0.7

// sglState is the SGLang core's state (SCHEDULERS.md §3).
type sglState struct {
	chunked int32   // the request whose prefill is in progress, or -1
	ratio   float64 // new_token_ratio
}

// scheduleSGLang is not built yet (checkBackend rejects SGLang).
func (s *Sim) scheduleSGLang(pb *passBuf) {}

// updateSGLang is not built yet.
func (s *Sim) updateSGLang(pb *passBuf) {}
