package main

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// BenchmarkTraceReplayMemory measures the memory `trace replay --tier quantitative`
// needs per request of the Mooncake conversation sample beyond the trace itself (the
// issue-13 bound: ≤ 2 KB), as slopes between a 3,000-request slice and the whole
// 12,031, so that what does not grow with the trace (the 100,000-block pool, the
// runtime, SQLite) drops out. Per slice, in process, with the collector running at
// every 2 % of heap growth so that the live heap it marks tracks the peak; a
// collection can still miss a short-lived peak (a growing slice or map copied), so
// each figure is the largest over the benchmark's runs (-benchtime 5x: one run
// varied by ±15 %):
//
//   - trace_B/req: the live heap of the loaded trace (refine.LoadTraceWorkload:
//     requests, sequence numbers, hash ids), per request of the slope;
//   - beyond_trace_B/req: the peak live heap of the replay (the reuse oracle's passes,
//     the calendar, the report and the rows to store; the largest heap any collection
//     found live, the loaded trace held throughout as the command holds it) less the
//     loaded trace's, per request of the slope;
//   - held_B/req: the same after the replay, with what the command then stores (the
//     rows) held.
//
// The process's peak RSS follows the peak live heap with the collector's slack
// (GOGC = 100: up to twice it); docs/traces.md compares the two.
func BenchmarkTraceReplayMemory(b *testing.B) {
	_, db, engPath := mooncakeStore(b)
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{MustExist: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	info, err := st.Trace(ctx, "conv")
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(engPath)
	if err != nil {
		b.Fatal(err)
	}
	eng, tim, err := oracle.ReadSetup(bufio.NewReader(f))
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	spec, err := engineSpec(eng)
	if err != nil {
		b.Fatal(err)
	}
	rc := quantitativeConfig(eng, spec, tim)
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	type sizes = memSizes
	measure := func(limit int) sizes {
		base := liveHeap()
		tw, err := refine.LoadTraceWorkload(ctx, st, info, store.TraceSlice{Limit: limit})
		if err != nil {
			b.Fatal(err)
		}
		loaded := liveHeap()
		w := watchLiveHeap()
		_, rows, err := quantitativeReplay(ctx, tw, rc)
		if err != nil {
			b.Fatal(err)
		}
		held := liveHeap()
		peak := max(w.stop(), held)
		runtime.KeepAlive(tw)
		runtime.KeepAlive(rows)
		return sizes{float64(loaded - base), float64(peak - loaded), float64(held - loaded)}
	}
	const small, all = 3000, 12031
	var s, l sizes
	for b.Loop() {
		s, l = s.max(measure(small)), l.max(measure(all))
	}
	n := float64(all - small)
	b.ReportMetric((l.trace-s.trace)/n, "trace_B/req")
	b.ReportMetric((l.peak-s.peak)/n, "beyond_trace_B/req")
	b.ReportMetric((l.held-s.held)/n, "held_B/req")
}

// memSizes are BenchmarkTraceReplayMemory's figures of one slice in bytes.
type memSizes struct{ trace, peak, held float64 }

// max is the larger of each figure: a collection can only miss the peak, never
// overstate it, so the largest over runs is the closest.
func (a memSizes) max(b memSizes) memSizes {
	return memSizes{max(a.trace, b.trace), max(a.peak, b.peak), max(a.held, b.held)}
}

// liveHeap collects and returns the live heap in bytes.
func liveHeap() uint64 {
	runtime.GC()
	return readLiveHeap()
}

func readLiveHeap() uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// liveHeapWatch keeps the largest live heap any collection marked since it started:
// a finalizer on an unreachable sentinel runs after each collection and re-arms.
type liveHeapWatch struct {
	mu      sync.Mutex
	peak    uint64
	stopped bool
}

type gcSentinel struct{ _ *int }

func watchLiveHeap() *liveHeapWatch {
	w := &liveHeapWatch{}
	w.arm()
	return w
}

func (w *liveHeapWatch) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.peak = max(w.peak, readLiveHeap())
		if !w.stopped {
			w.arm()
		}
	})
}

// stop ends the watch and returns the peak live heap seen.
func (w *liveHeapWatch) stop() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	return w.peak
}
