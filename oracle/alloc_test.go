package oracle_test

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing/timing"
)

// TestNoAllocationPerPass: the hot loop allocates per request, never per pass — a run
// with 16× the passes (osl 1024 instead of 64) allocates about as much.
func TestNoAllocationPerPass(t *testing.T) {
	allocs := func(osl int) (float64, int) {
		passes := 0
		a := testing.AllocsPerRun(3, func() {
			e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64, BlockSize: 16,
				KVCapacityTokens: (64*(512+1024)/16 + 63) * 16, EnableChunkedPrefill: true, EnablePrefixCaching: true, AsyncScheduling: true}
			s, err := oracle.New(e, timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.04}, oracle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.RunClosedLoop(context.Background(), oracle.ClosedLoop{Shape: oracle.Shape{ISL: 512, OSL: osl, Prefix: 256, Prewarm: true}, Clients: 16, Generations: 4})
			if err != nil {
				t.Fatal(err)
			}
			passes = res.NumPasses
		})
		return a, passes
	}
	aShort, pShort := allocs(64)
	aLong, pLong := allocs(1024)
	if pLong < 8*pShort {
		t.Fatalf("passes %d vs %d: the long run is not long enough to tell", pLong, pShort)
	}
	// per-request slices grow with osl (token times, block tables) but their count does not
	if aLong > aShort+16 {
		t.Fatalf("allocations grew with passes: %.0f (%d passes) vs %.0f (%d passes)", aLong, pLong, aShort, pShort)
	}
}
