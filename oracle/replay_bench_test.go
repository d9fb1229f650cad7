package oracle

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// BenchmarkReplayMooncakeDES replays the Mooncake conversation sample (12,031
// requests, hash ids as block identities) through the DES with SummaryOnly, as
// `aicdb trace replay --tier oracle` does (vLLM, 100,000 blocks, budget 8192, 256
// sequences); B/op over the requests is the DES's memory per request.
func BenchmarkReplayMooncakeDES(b *testing.B) {
	rows := readMooncakeConversation(b)
	eng := Engine{Backend: VLLM, MaxNumBatchedTokens: 8192, MaxNumSeqs: 256, BlockSize: 16, NumGPUBlocks: 100000,
		EnableChunkedPrefill: true, EnablePrefixCaching: true}
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}
	for b.Loop() {
		s, err := New(eng, tm, Options{SummaryOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			if _, err := s.AddShared(workload.Request{ArrivalMs: r.At, PromptLen: r.In, MaxTokens: r.Out},
				SharedPrefix{HashIDs: r.IDs, HashBlock: 512}); err != nil {
				b.Fatal(err)
			}
		}
		res, err := s.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := res.Summary(); err != nil {
			b.Fatal(err)
		}
	}
}
