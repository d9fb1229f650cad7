package engine

import "fmt"

// vllm is the vLLM v1 scheduler (SCHEDULERS.md §2, V-R1..V-R12).
type vllm struct{}

// Name implements Calendar.
func (vllm) Name() Backend { return VLLM }

// Defaults implements Calendar: the API-server defaults on a ≥ 70 GiB non-A100
// GPU; async scheduling resolves to true when compatible (V-R10).
func (vllm) Defaults(version string) (Spec, error) {
	if err := checkVersion(version); err != nil {
		return Spec{}, err
	}
	return Spec{Backend: VLLM, MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024, EnableChunkedPrefill: true,
		AsyncScheduling: true, BlockSize: 16}, nil
}

// Validate implements Calendar.
func (vllm) Validate(s Spec) error {
	return positive(VLLM, knob{"max_num_batched_tokens", s.MaxNumBatchedTokens}, knob{"max_num_seqs", s.MaxNumSeqs},
		knob{"block_size", s.BlockSize})
}

// TokenBudget implements Calendar: max_num_batched_tokens (V-R1).
func (vllm) TokenBudget(s Spec) int { return s.MaxNumBatchedTokens }

// SeatCap implements Calendar: max_num_seqs (V-R3).
func (vllm) SeatCap(s Spec) int { return s.MaxNumSeqs }

// SetTokenBudget implements Calendar.
func (vllm) SetTokenBudget(s *Spec, n int) { s.MaxNumBatchedTokens = n }

// SetSeatCap implements Calendar.
func (vllm) SetSeatCap(s *Spec, n int) { s.MaxNumSeqs = n }

// Traits implements Calendar.
func (vllm) Traits(Spec) Traits {
	return Traits{Overlap: true, PerPassKV: true, ThresholdChunks: true, SharedBudget: true,
		DecodeRecomputesFirstToken: true}
}

// trtllm is the TRT-LLM scheduler (SCHEDULERS.md §4, T-R1..T-R3).
type trtllm struct{}

// Name implements Calendar.
func (trtllm) Name() Backend { return TRTLLM }

// Defaults implements Calendar: the overlap executor is on by default (§4.2).
func (trtllm) Defaults(version string) (Spec, error) {
	if err := checkVersion(version); err != nil {
		return Spec{}, err
	}
	return Spec{Backend: TRTLLM, MaxBatchSize: 2048, MaxNumTokens: 8192, AsyncScheduling: true, BlockSize: 32,
		CapacityPolicy: PolicyGuaranteedNoEvict}, nil
}

// Validate implements Calendar.
func (trtllm) Validate(s Spec) error {
	if err := positive(TRTLLM, knob{"max_batch_size", s.MaxBatchSize}, knob{"max_num_tokens", s.MaxNumTokens},
		knob{"block_size", s.BlockSize}); err != nil {
		return err
	}
	if s.EnableChunkedPrefill && s.MaxNumTokens < s.BlockSize {
		return fmt.Errorf("engine max_num_tokens = %d: with chunked prefill a chunk is a multiple of block_size (%d); raise max_num_tokens", s.MaxNumTokens, s.BlockSize)
	}
	switch s.CapacityPolicy {
	case PolicyGuaranteedNoEvict, PolicyMaxUtilization:
		return nil
	}
	return fmt.Errorf("engine capacity_policy %q: use guaranteed_no_evict or max_utilization", s.CapacityPolicy)
}

// TokenBudget implements Calendar: max_num_tokens (T-R3).
func (trtllm) TokenBudget(s Spec) int { return s.MaxNumTokens }

// SeatCap implements Calendar: max_batch_size (T-R1/T-R3).
func (trtllm) SeatCap(s Spec) int { return s.MaxBatchSize }

// SetTokenBudget implements Calendar.
func (trtllm) SetTokenBudget(s *Spec, n int) { s.MaxNumTokens = n }

// SetSeatCap implements Calendar.
func (trtllm) SetSeatCap(s *Spec, n int) { s.MaxBatchSize = n }

// Traits implements Calendar: GUARANTEED_NO_EVICT reserves at admission (T-R1),
// MAX_UTILIZATION pauses pass by pass (T-R2).
func (trtllm) Traits(s Spec) Traits {
	perPass := s.CapacityPolicy == PolicyMaxUtilization
	return Traits{Overlap: true, PerPassKV: perPass, AdmissionReservesKV: !perPass, SharedBudget: true,
		BudgetsCachedPrefix: true, BlockAlignedChunks: true, FinalFreesSeat: true}
}

// sglang is the SGLang scheduler (SCHEDULERS.md §3, S-R1..S-R6).
type sglang struct{}

// Name implements Calendar.
func (sglang) Name() Backend { return SGLang }

// Defaults implements Calendar. enable_mixed_chunk is true: the product's default
// deployment rule (QUEUEING.md §3), not the engine's own default (false). The
// overlap scheduler (event_loop_overlap, §3.2) is on, as in SGLang
// (--disable-overlap-schedule turns it off): AsyncScheduling is true.
func (sglang) Defaults(version string) (Spec, error) {
	if err := checkVersion(version); err != nil {
		return Spec{}, err
	}
	return Spec{Backend: SGLang, ChunkedPrefillSize: 8192, MaxPrefillTokens: 16384, EnableChunkedPrefill: true,
		EnableMixedChunk: true, MaxNumSeqs: 2048, AsyncScheduling: true, BlockSize: 1}, nil
}

// SGLangChunkedPrefillSize is SGLang's default chunked_prefill_size for a GPU
// of memBytes (ServerArgs._handle_gpu_memory_settings, capacity in MiB): 2048
// below 35 GiB, 4096 below 60 GiB, 8192 below 160 GiB (H100, H200), 16384 above
// (B200, MI300); 0 when the capacity is not known (the engine default stays).
// It is the one copy of that table: the calendar's profile rules and the
// mem_fraction_static reserve both read it.
func SGLangChunkedPrefillSize(memBytes float64) int {
	mib := memBytes / (1 << 20)
	switch {
	case !(mib > 0):
		return 0
	case mib < 35*1024:
		return 2048
	case mib < 60*1024:
		return 4096
	case mib < 160*1024:
		return 8192
	}
	return 16384
}

// Validate implements Calendar.
func (sglang) Validate(s Spec) error {
	if err := positive(SGLang, knob{"max_num_seqs", s.MaxNumSeqs}, knob{"block_size", s.BlockSize},
		knob{"max_prefill_tokens", s.MaxPrefillTokens}); err != nil {
		return err
	}
	if s.EnableChunkedPrefill {
		if err := positive(SGLang, knob{"chunked_prefill_size", s.ChunkedPrefillSize}); err != nil {
			return err
		}
		if s.ChunkedPrefillSize < s.BlockSize {
			return fmt.Errorf("engine chunked_prefill_size = %d: must be ≥ block_size (page size) %d", s.ChunkedPrefillSize, s.BlockSize)
		}
	}
	return nil
}

// TokenBudget implements Calendar: chunked_prefill_size, or max_prefill_tokens
// when chunking is off (S-R4).
func (sglang) TokenBudget(s Spec) int {
	if s.EnableChunkedPrefill {
		return s.ChunkedPrefillSize
	}
	return s.MaxPrefillTokens
}

// SeatCap implements Calendar: max_running_requests (S-R4).
func (sglang) SeatCap(s Spec) int { return s.MaxNumSeqs }

// SetTokenBudget implements Calendar: chunked_prefill_size = n, with
// max_prefill_tokens raised to n so that the second prompt cap does not bind
// first (S-R4).
func (sglang) SetTokenBudget(s *Spec, n int) {
	s.ChunkedPrefillSize = n
	s.MaxPrefillTokens = max(s.MaxPrefillTokens, n)
}

// SetSeatCap implements Calendar.
func (sglang) SetSeatCap(s *Spec, n int) { s.MaxNumSeqs = n }

// Traits implements Calendar. Overlap: AsyncScheduling is the overlap scheduler
// (§3.2): batch k+1 is formed and launched before batch k's results are
// processed, and a request that finishes in batch k still runs in batch k+1 (its
// extra token is discarded).
func (sglang) Traits(s Spec) Traits {
	return Traits{Overlap: true, FinishedRunsAgain: true, Alternating: !s.EnableMixedChunk, PerPassKV: true,
		RatioAdmission: true, BlockAlignedChunks: true, PrefillBuffersPerSeat: 2, FirstTokenFromDecode: true, DecodePreallocates: true}
}
