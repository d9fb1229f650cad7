package perfdb

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"pgregory.net/rapid"
)

func testPassTiming(t testing.TB) *PassTiming {
	t.Helper()
	pt, err := NewPassTiming(testEstimator(t, "vllm", 8))
	if err != nil {
		t.Fatal(err)
	}
	return pt
}

// TestPassTimingMatchesAggSteps: the agg shapes price as t_mix and t_gen when
// the decode context (isl + osl/2 + 1 = 1088) lies on the bucket grid.
func TestPassTimingMatchesAggSteps(t *testing.T) {
	pt := testPassTiming(t)
	isl, osl := 1024, 126
	mix, err := pt.TMixMs(isl, 3, isl, osl, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pt.PassMs(&timing.Pass{Prefill: []timing.Chunk{{Tokens: isl}}, Decode: []int{1000, 1088, 1176}})
	if err != nil || !near(got, mix, 1e-12) {
		t.Errorf("mixed pass %v (err %v), t_mix %v", got, err, mix)
	}
	gen, err := pt.TGenMs(4, isl, osl)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pt.PassMs(&timing.Pass{Decode: []int{1088, 1088, 1088, 1088}}); err != nil || !near(got, gen, 1e-12) {
		t.Errorf("decode pass %v (err %v), t_gen %v", got, err, gen)
	}
}

// TestPassTimingProperties: positive, finite, order-independent, cached value
// identical to the uncached one, monotone in decode rows.
func TestPassTimingProperties(t *testing.T) {
	pt := testPassTiming(t)
	rapid.Check(t, func(rt *rapid.T) {
		var p timing.Pass
		for i, n := 0, rapid.IntRange(0, 4).Draw(rt, "chunks"); i < n; i++ {
			comp := rapid.IntRange(0, 20000).Draw(rt, "computed")
			p.Prefill = append(p.Prefill, timing.Chunk{Tokens: rapid.IntRange(1, 8192).Draw(rt, "tokens"), Computed: comp})
		}
		for i, n := 0, rapid.IntRange(0, 64).Draw(rt, "rows"); i < n; i++ {
			p.Decode = append(p.Decode, rapid.IntRange(1, 40000).Draw(rt, "ctx"))
		}
		if len(p.Prefill)+len(p.Decode) == 0 {
			return
		}
		v, err := pt.PassMs(&p)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			rt.Fatalf("pass %+v priced %v (err %v)", p, v, err)
		}
		uncached, err := pt.price(&p)
		if err != nil || uncached != v {
			rt.Fatalf("cached %v != uncached %v (%v)", v, uncached, err)
		}
		rev := timing.Pass{Decode: p.Decode}
		for i := len(p.Prefill) - 1; i >= 0; i-- {
			rev.Prefill = append(rev.Prefill, p.Prefill[i])
		}
		if w, err := pt.PassMs(&rev); err != nil || w != v {
			rt.Fatalf("chunk order changed the price: %v vs %v", v, w)
		}
		more := timing.Pass{Prefill: p.Prefill, Decode: append(append([]int(nil), p.Decode...), p.Decode...)}
		if m, err := pt.PassMs(&more); len(p.Decode) > 0 && (err != nil || m < v) {
			rt.Fatalf("doubling the decode rows made the pass cheaper")
		}
	})
}

// TestDecodeOnlyMsEqualsPassMs: DecodeOnlyMs(rows, Σctx) is bit-identical to
// PassMs of every decode-only pass with that many rows and that context sum
// (queueing prices decode stretches through it without visiting rows), and
// rejects empty or zero rows. The two are asked of separate timings, so each
// price is computed (or cached) by its own path: a shared cache would compare
// PassMs's stored value with itself.
func TestDecodeOnlyMsEqualsPassMs(t *testing.T) {
	byPass, byStretch := testPassTiming(t), testPassTiming(t)
	rapid.Check(t, func(rt *rapid.T) {
		var p timing.Pass
		sum := 0
		for i, n := 0, rapid.IntRange(1, 300).Draw(rt, "rows"); i < n; i++ {
			c := rapid.IntRange(1, 40000).Draw(rt, "ctx")
			p.Decode = append(p.Decode, c)
			sum += c
		}
		want, err := byPass.PassMs(&p)
		if err != nil {
			rt.Fatal(err)
		}
		if got, err := byStretch.DecodeOnlyMs(len(p.Decode), sum); err != nil || got != want {
			rt.Fatalf("DecodeOnlyMs(%d, %d) = %v (err %v), PassMs %v", len(p.Decode), sum, got, err, want)
		}
	})
	// on one timing, a stretch priced first gives the pass its cached price
	one := testPassTiming(t)
	got, err := one.DecodeOnlyMs(3, 3*1500)
	if err != nil {
		t.Fatal(err)
	}
	if want, err := one.PassMs(&timing.Pass{Decode: []int{1400, 1500, 1600}}); err != nil || got != want {
		t.Errorf("DecodeOnlyMs %v, then PassMs %v (err %v)", got, want, err)
	}
	for _, c := range [][2]int{{0, 0}, {-1, 10}, {4, 3}} {
		if v, err := one.DecodeOnlyMs(c[0], c[1]); err == nil || v != 0 {
			t.Errorf("DecodeOnlyMs(%d, %d) = %v, want an error", c[0], c[1], v)
		}
	}
}

// TestDecodeOnlySpanMs: the span's price is DecodeOnlyMs's at every summed
// context in [ctx, maxCtx] (each priced on a fresh timing, so no cache entry
// is shared), and the span is maximal: maxCtx + 1 has another key.
func TestDecodeOnlySpanMs(t *testing.T) {
	span := testPassTiming(t)
	rapid.Check(t, func(rt *rapid.T) {
		rows := rapid.IntRange(1, 2048).Draw(rt, "rows")
		ctx := rows * rapid.IntRange(1, 100000).Draw(rt, "mean")
		ctx += rapid.IntRange(0, rows-1).Draw(rt, "rest")
		v, maxCtx, err := span.DecodeOnlySpanMs(rows, ctx)
		if err != nil || maxCtx < ctx {
			rt.Fatalf("DecodeOnlySpanMs(%d, %d) = %v, %d, %v", rows, ctx, v, maxCtx, err)
		}
		fresh := testPassTiming(t)
		for _, x := range []int{ctx, maxCtx, rapid.IntRange(ctx, maxCtx).Draw(rt, "x")} {
			if got, err := fresh.DecodeOnlyMs(rows, x); err != nil || got != v {
				rt.Fatalf("rows %d: DecodeOnlyMs at %d = %v (err %v), the span from %d to %d says %v", rows, x, got, err, ctx, maxCtx, v)
			}
		}
		if meanContext(maxCtx+1, rows) == meanContext(ctx, rows) {
			rt.Fatalf("rows %d: the span from %d ends at %d, but %d has the same mean context", rows, ctx, maxCtx, maxCtx+1)
		}
	})
	if _, _, err := span.DecodeOnlySpanMs(4, 3); err == nil {
		t.Error("DecodeOnlySpanMs(4, 3): want an error")
	}
}

// TestMeanContext: the 32-bit division gives the 64-bit quotient, at the
// boundary and beyond it.
func TestMeanContext(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := rapid.IntRange(1, 1<<33).Draw(rt, "rows")
		sum := d + rapid.IntRange(0, 1<<34).Draw(rt, "extra")
		if got, want := meanContext(sum, d), bucket((sum+d/2)/d); got != want {
			rt.Fatalf("meanContext(%d, %d) = %d, want %d", sum, d, got, want)
		}
	})
	for _, c := range [][2]int{{math.MaxUint32, 1}, {math.MaxUint32 - 1, 2}, {math.MaxUint32, 3}, {1 << 40, 1 << 33}, {7, 7}} {
		if got, want := meanContext(c[0], c[1]), bucket((c[0]+c[1]/2)/c[1]); got != want {
			t.Errorf("meanContext(%d, %d) = %d, want %d", c[0], c[1], got, want)
		}
	}
}

// TestBucketEnd: bucket is non-decreasing and bucketEnd(b) is the last x of
// bucket b.
func TestBucketEnd(t *testing.T) {
	prev := 0
	for x := 1; x < 1<<18; x++ {
		b := bucket(x)
		if b < prev {
			t.Fatalf("bucket(%d) = %d < bucket(%d) = %d", x, b, x-1, prev)
		}
		if b != prev && prev > 0 && bucketEnd(prev) != x-1 {
			t.Fatalf("bucketEnd(%d) = %d, want %d", prev, bucketEnd(prev), x-1)
		}
		prev = b
	}
}

// TestPassTimingConcurrent prices from many goroutines (run with -race).
func TestPassTimingConcurrent(t *testing.T) {
	pt := testPassTiming(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200 && errs[g] == nil; i++ {
				_, errs[g] = pt.PassMs(&timing.Pass{Prefill: []timing.Chunk{{Tokens: 1 + (i*g)%512, Computed: i}}, Decode: []int{100 + i}})
			}
		}(g)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestPassTimingBadPass: invalid chunks are errors, not prices, and an error
// does not stick: the next valid pass prices normally.
func TestPassTimingBadPass(t *testing.T) {
	pt := testPassTiming(t)
	if v, err := pt.PassMs(&timing.Pass{Prefill: []timing.Chunk{{Tokens: 0}}}); err == nil || v != 0 {
		t.Errorf("zero-token chunk priced %v (err %v)", v, err)
	}
	if v, err := pt.PassMs(&timing.Pass{Decode: []int{0}}); err == nil || v != 0 {
		t.Errorf("zero-context decode row priced %v (err %v)", v, err)
	}
	if v, err := pt.PassMs(&timing.Pass{Decode: []int{1025}}); err != nil || !(v > 0) {
		t.Errorf("valid pass after an error: %v (err %v)", v, err)
	}
}

func TestBucket(t *testing.T) {
	for x := 1; x < 1<<20; x += 1 + x/7 {
		b := bucket(x)
		if math.Abs(float64(b-x))/float64(x) > 1.0/32+1e-12 {
			t.Fatalf("bucket(%d) = %d: error above 1/32", x, b)
		}
		if bucket(b) != b {
			t.Fatalf("bucket not idempotent at %d", x)
		}
	}
}

// BenchmarkPassTimingCached prices a repeated mixed pass (the cache hit path).
func BenchmarkPassTimingCached(b *testing.B) {
	pt := testPassTiming(b)
	p := &timing.Pass{Prefill: []timing.Chunk{{Tokens: 2048, Computed: 4096}, {Tokens: 512}}, Decode: make([]int, 64)}
	for i := range p.Decode {
		p.Decode[i] = 1000 + 37*i
	}
	if _, err := pt.PassMs(p); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := pt.PassMs(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPassTimingUncachedH200 prices a new mixed pass shape per iteration
// on the embedded h200 vllm 0.22.0 data (Qwen3-32B, tp 8): the cost of a cache miss.
func BenchmarkPassTimingUncachedH200(b *testing.B) {
	d, err := LoadEmbedded(context.Background(), "h200_sxm", "vllm", "0.22.0")
	if err != nil {
		b.Fatal(err)
	}
	m, err := EmbeddedModel("Qwen/Qwen3-32B")
	if err != nil {
		b.Fatal(err)
	}
	e, err := NewEstimator(d, m, Config{TP: 8, MoEEP: 8})
	if err != nil {
		b.Fatal(err)
	}
	pt, err := NewPassTiming(e)
	if err != nil {
		b.Fatal(err)
	}
	dec := make([]int, 32)
	for i := range dec {
		dec[i] = 2000 + 50*i
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := timing.Pass{Prefill: []timing.Chunk{{Tokens: 1 + i%100000, Computed: 1024}}, Decode: dec}
		if _, err := pt.PassMs(&p); err != nil {
			b.Fatal(err)
		}
	}
}
