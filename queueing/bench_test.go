package queueing

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

var benchLin = timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 1e-5}

// memo is a cached timing for the benchmarks: it keys a pass by its exact shape
// (chunks, decode rows, Σ context) and prices a miss with the underlying timing —
// the access pattern of perfdb.PassTiming, whose cache makes repeated shapes cheap,
// and like it a decode-only pricer (DecodeOnlyMs), so decode stretches take the
// fast path as they do on perf data.
type memo struct {
	t  timing.Linear
	mu sync.Mutex
	m  map[memoKey]float64
}

// DecodeOnlyMs implements the decode-only pricer: the same key and float64 as
// PassMs of a decode-only pass of rows rows whose contexts sum to ctx
// (Linear.DecodeOnlyMs is bit for bit its PassMs of any such pass).
func (c *memo) DecodeOnlyMs(rows, ctx int) (float64, error) {
	k := memoKey{rows: rows, ctx: ctx}
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := c.t.DecodeOnlyMs(rows, ctx)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.m[k] = v
	c.mu.Unlock()
	return v, nil
}

type memoKey struct {
	chunks, tokens, computed, rows, ctx int
}

func (c *memo) PassMs(p *timing.Pass) (float64, error) {
	k := memoKey{chunks: len(p.Prefill), tokens: p.PrefillTokens(), rows: len(p.Decode), ctx: p.DecodeContext()}
	for _, ch := range p.Prefill {
		k.computed += ch.Computed
	}
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := c.t.PassMs(p)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.m[k] = v
	c.mu.Unlock()
	return v, nil
}

// BenchmarkScreening: one screening point (vLLM, C = 32, isl 4096, osl 256).
func BenchmarkScreening(b *testing.B) {
	e, _ := engine.Defaults(engine.VLLM, "")
	w := workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Screening(w, e, benchLin); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScreener: the same point through a reused Screener (the sweep's hot
// path: one Screener per worker), so the scratch space is not reallocated.
func BenchmarkScreener(b *testing.B) {
	e, _ := engine.Defaults(engine.VLLM, "")
	w := workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}
	var s Screener
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := s.Screen(w, e, benchLin); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuantitativeVLLM: the quantitative point (vLLM, C = 32, isl
// 4096, osl 256, budget 8192), with Linear and with a warm cached timing (whose
// report is Linear's, bit for bit: checked once before timing). perfdb's
// BenchmarkQuantitativeVLLMPerfData prices the point from real perf data.
func BenchmarkQuantitativeVLLM(b *testing.B) {
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 8192
	w := workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}
	ref, err := Quantitative(context.Background(), w, e, benchLin)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		t    timing.Timing
	}{{"linear", benchLin}, {"cached", &memo{t: benchLin, m: map[memoKey]float64{}}}} {
		b.Run(c.name, func(b *testing.B) {
			r, err := Quantitative(context.Background(), w, e, c.t) // warms the cache
			if err != nil {
				b.Fatal(err)
			}
			if !reflect.DeepEqual(r, ref) {
				b.Fatalf("%s: the report differs from Linear's", c.name)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Quantitative(context.Background(), w, e, c.t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantitativeVLLMBurst: the same point under the exact burst semantics
// (Options{}: one run, no client round trip), the cost of one limit-cycle run.
func BenchmarkQuantitativeVLLMBurst(b *testing.B) {
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 8192
	w := workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := QuantitativeWith(context.Background(), w, e, benchLin, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenLoop10k: 10,000 open-loop requests at ρ ≈ 0.6 (vLLM, isl 1024,
// osl 128).
func BenchmarkOpenLoop10k(b *testing.B) {
	e, _ := engine.Defaults(engine.VLLM, "")
	w := workload.Spec{ISL: 1024, OSL: 128, RateRPS: 8, NumRequests: 10000}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, err := Quantitative(context.Background(), w, e, benchLin)
		if err != nil || r.Unstable {
			b.Fatal(err, r.UnstableReason)
		}
	}
}

// BenchmarkFiniteSummarySGLangEagle: the summary run a calibration fit evaluates
// (QuantitativeFiniteSummary) of an SGLang EAGLE deployment with a KV pool — C 64,
// isl 1024, osl 1024, one draft at 0.7 accepted, 20·C requests — with its decode
// stretches in bulk (fastForwardDrafts keeping each step's KV) and pass by pass
// (NoFastForward): the same report (TestPropertyFiniteSummaryIdentical).
func BenchmarkFiniteSummarySGLangEagle(b *testing.B) {
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		b.Fatal(err)
	}
	e.MaxNumSeqs, e.MaxPrefillTokens = 64, 1024+64+1500
	e.SetDrafts(1, 0.7)
	e.KVCapacityTokens = 64 * (1024 + 1024 + 64)
	w := workload.Spec{ISL: 1024, OSL: 1024, Concurrency: 64}
	run := FiniteRun{Requests: 20 * 64, Desync: true}
	for _, c := range []struct {
		name string
		off  bool
	}{{"bulk", false}, {"pass-by-pass", true}} {
		b.Run(c.name, func(b *testing.B) {
			o := DefaultOptions()
			o.NoFastForward = c.off
			b.ReportAllocs()
			for b.Loop() {
				tm := &memo{t: benchLin, m: map[memoKey]float64{}}
				if _, err := QuantitativeFiniteSummary(context.Background(), w, e, tm, o, run); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFiniteSummarySGLangMixed: the summary run of an SGLang deployment as
// aiconfigurator deploys it for the measured rows (mixed chunk on, overlap
// scheduler on, max_prefill_tokens isl + 1500, running cap = C, page 1, a KV pool
// a fifth above the clients' full length) at C 256, isl 1024, osl 1024, 20·C
// requests, desynchronised: the large-C rows that dominate an SGLang
// calibration's cost (every pass with an arrival is a mixed pass, so there is
// little decode stretch to take in bulk).
func BenchmarkFiniteSummarySGLangMixed(b *testing.B) {
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		b.Fatal(err)
	}
	const c = 256
	e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk = c, 1024+1500, true
	benchFiniteSummaryLarge(b, e, c)
}

// benchFiniteSummaryLarge times the desynchronised summary run of 20·c
// requests of isl 1024, osl 1024 on engine e with a KV pool a fifth above the
// c clients' full length (linear timing through the pricing memo).
func benchFiniteSummaryLarge(b *testing.B, e engine.Spec, c int) {
	e.KVCapacityTokens = c * (1024 + 1024) * 6 / 5
	w := workload.Spec{ISL: 1024, OSL: 1024, Concurrency: c}
	run := FiniteRun{Requests: 20 * c, Desync: true}
	b.ReportAllocs()
	for b.Loop() {
		tm := &memo{t: benchLin, m: map[memoKey]float64{}}
		if _, err := QuantitativeFiniteSummary(context.Background(), w, e, tm, DefaultOptions(), run); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFiniteSummaryTRTLLM: the summary run of a TensorRT-LLM deployment as
// aiconfigurator deploys it for the measured rows (overlap executor,
// GUARANTEED_NO_EVICT with a KV pool a fifth above the clients' full length,
// max_batch_size = C, max_num_tokens C + isl + 1500 rounded to a block,
// chunking off) at C 256, isl 1024, osl 1024, 20·C requests, desynchronised:
// the large-C rows of a TensorRT-LLM calibration.
func BenchmarkFiniteSummaryTRTLLM(b *testing.B) {
	e, err := engine.Defaults(engine.TRTLLM, "")
	if err != nil {
		b.Fatal(err)
	}
	const c = 256
	e.MaxBatchSize, e.MaxNumTokens = c, (c+1024+1500+31)/32*32
	benchFiniteSummaryLarge(b, e, c)
}

// BenchmarkQuantitativeOpenRun: a measured open-loop run as accuracy predicts it
// (vLLM, isl 4096, osl 256, budget 8192; 200 Poisson sends at 6 rps, no bound,
// OpenPaths(200) = 8 pooled paths), with Linear timing.
func BenchmarkQuantitativeOpenRun(b *testing.B) {
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 8192
	w := workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}
	run := FiniteRun{Requests: 200, Open: true, RateRPS: 6, Paths: OpenPaths(200)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := QuantitativeFinite(context.Background(), w, e, benchLin, DefaultOptions(), run); err != nil {
			b.Fatal(err)
		}
	}
}
