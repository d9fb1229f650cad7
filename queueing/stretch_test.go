package queueing

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/workload"
)

// checkStretchExact fails unless the decode-stretch fast path gives the
// pass-by-pass recursion's report bit for bit for w on e: the steady state
// under the default options and the burst, and a calibration's objective (a
// desync finite run's summary, 10 requests per client).
func checkStretchExact(t *testing.T, name string, w workload.Spec, e engine.Spec) {
	t.Helper()
	for _, o := range []Options{DefaultOptions(), {}} {
		slow := o
		slow.NoFastForward = true
		a, errA := QuantitativeWith(context.Background(), w, e, benchLin, o)
		b, errB := QuantitativeWith(context.Background(), w, e, benchLin, slow)
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v / %v", name, errA, errB)
		}
		if !reflect.DeepEqual(a.Columns(1), b.Columns(1)) || a.Diagnostics.Passes != b.Diagnostics.Passes {
			t.Errorf("%s, stagger phases %d: fast and pass-by-pass reports differ (passes %d / %d, TTFT p99 %v / %v)",
				name, o.StaggerPhases, a.Diagnostics.Passes, b.Diagnostics.Passes, a.TTFTSteady.Quantile(0.99), b.TTFTSteady.Quantile(0.99))
		}
	}
	run := FiniteRun{Requests: 10 * w.Concurrency, Desync: true}
	slow := DefaultOptions()
	slow.NoFastForward = true
	a, errA := QuantitativeFiniteSummary(context.Background(), w, e, benchLin, DefaultOptions(), run)
	b, errB := QuantitativeFiniteSummary(context.Background(), w, e, benchLin, slow, run)
	if errA != nil || errB != nil {
		t.Fatalf("%s desync run: %v / %v", name, errA, errB)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("%s desync run: fast and pass-by-pass summaries differ (TTFT mean %v / %v)", name, a.TTFTSteady.Mean(), b.TTFTSteady.Mean())
	}
}

// TestRecvIntervalStretchIsExact: with SGLang's receipt interval (S-R7) an
// arrival that is due waits for the schedule whose count comes round, and the
// decode stretch runs on until that schedule (arrivalUnseen): exact, synchronous
// and overlapped, at intervals that divide the stretches and ones that do not.
func TestRecvIntervalStretchIsExact(t *testing.T) {
	for _, every := range []int{2, 7, 30} {
		for _, async := range []bool{false, true} {
			e, err := engine.Defaults(engine.SGLang, "")
			if err != nil {
				t.Fatal(err)
			}
			e.SchedulerRecvInterval, e.AsyncScheduling = every, async
			for _, c := range []int{3, 16} {
				w := workload.Spec{ISL: 1024, OSL: 300, Concurrency: c, OSLQuantiles: []int{240, 270, 300}}
				checkStretchExact(t, fmt.Sprintf("recv every %d async %v c %d", every, async, c), w, e)
			}
		}
	}
}

// TestDraftStretchRulesAreExact: the MTP stretch of a summary run
// (fastForwardDrafts) takes the same two rules — SGLang EAGLE through skipped
// receipts, TensorRT-LLM one-model MTP with held contexts — bit for bit.
func TestDraftStretchRulesAreExact(t *testing.T) {
	for _, every := range []int{2, 7, 30} {
		e, err := engine.Defaults(engine.SGLang, "")
		if err != nil {
			t.Fatal(err)
		}
		e.SchedulerRecvInterval = every
		e.SetDrafts(3, 1.7)
		for _, c := range []int{3, 16} {
			w := workload.Spec{ISL: 1024, OSL: 300, Concurrency: c, OSLQuantiles: []int{240, 270, 300}}
			checkStretchExact(t, fmt.Sprintf("EAGLE recv every %d c %d", every, c), w, e)
		}
	}
	for _, iters := range []int{5, 20} {
		for _, async := range []bool{false, true} {
			e, err := engine.Defaults(engine.TRTLLM, "")
			if err != nil {
				t.Fatal(err)
			}
			e.BatchWaitTimeoutIters, e.BatchWaitMaxTokensRatio = iters, 0.9
			e.AsyncScheduling, e.MaxNumTokens = async, 4096
			e.SetDrafts(3, 1.7)
			for _, c := range []int{4, 24} {
				w := workload.Spec{ISL: 1024, OSL: 300, Concurrency: c, OSLQuantiles: []int{240, 270, 300}}
				checkStretchExact(t, fmt.Sprintf("MTP batch wait %d async %v c %d", iters, async, c), w, e)
			}
		}
	}
}

// TestBatchWaitStretchIsExact: TensorRT-LLM contexts that batch waiting holds
// (T-R6) or that get no budget stay out of a decode stretch, which ends where
// the hold's count reaches the timeout (trtContextsOut, holdLimit): exact,
// synchronous and overlapped, chunked and whole prompts, with a timeout that
// lets contexts through and a token ratio that does.
func TestBatchWaitStretchIsExact(t *testing.T) {
	for _, bw := range []struct {
		iters int
		ratio float64
	}{{20, 0.9}, {5, 0.9}, {40, 0.3}} {
		for _, async := range []bool{false, true} {
			for _, chunked := range []bool{false, true} {
				e, err := engine.Defaults(engine.TRTLLM, "")
				if err != nil {
					t.Fatal(err)
				}
				e.BatchWaitTimeoutIters, e.BatchWaitMaxTokensRatio = bw.iters, bw.ratio
				e.AsyncScheduling, e.EnableChunkedPrefill, e.MaxNumTokens = async, chunked, 4096
				for _, c := range []int{4, 24} {
					w := workload.Spec{ISL: 1024, OSL: 300, Concurrency: c, OSLQuantiles: []int{240, 270, 300}}
					checkStretchExact(t, fmt.Sprintf("batch wait %d/%v async %v chunked %v c %d", bw.iters, bw.ratio, async, chunked, c), w, e)
				}
			}
		}
	}
}

// TestSpentRowStretchIsExact: under SGLang's overlap scheduler the pass
// scheduled while a request's final token was in flight carries a spent row
// for it; a stretch from that pass runs the other rows (sglSpentOnly,
// sglDropSpent) and leaves the KV pool's batch_is_full and running length as
// the schedules would: exact without a pool, with a roomy one and with one
// tight enough to fill, with and without the receipt interval.
func TestSpentRowStretchIsExact(t *testing.T) {
	for _, kv := range []int{0, 100000, 9000} {
		for _, every := range []int{0, 7} {
			e, err := engine.Defaults(engine.SGLang, "")
			if err != nil {
				t.Fatal(err)
			}
			e.AsyncScheduling, e.SchedulerRecvInterval, e.KVCapacityTokens = true, every, kv
			for _, c := range []int{3, 16} {
				w := workload.Spec{ISL: 1024, OSL: 300, Concurrency: c, OSLQuantiles: []int{240, 270, 300}}
				checkStretchExact(t, fmt.Sprintf("kv %d recv every %d c %d", kv, every, c), w, e)
			}
		}
	}
}

// TestSGLDropSpent: a completed pass's spent rows leave it (its other rows and
// their contexts kept in order), and with a KV pool the state is what the next
// schedule makes of the finishes (scheduleSGLang's start and sglNote): a sticky
// batch_is_full cleared, the chunk flag reset, the running length noted. The
// stretch's exactness does not show these (the next regular schedule would
// apply them too), but the state-cycle detector reads them (stateHeader).
func TestSGLDropSpent(t *testing.T) {
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	e.AsyncScheduling, e.KVCapacityTokens = true, 10000
	s := newSim(e, benchLin)
	s.kv.on = true
	s.reqs = []simReq{{isl: 10, osl: 5, gSched: 3}, {isl: 20, osl: 4, gSched: 4, finished: true}, {isl: 30, osl: 9, gSched: 2}}
	s.running = []int32{0, 2}
	s.kv.batchFull, s.kv.runLen, s.kv.chunkRan = true, 3, true
	p := &simPass{}
	p.entries, p.tp.Decode = appendDecodeRow(p.entries, p.tp.Decode, 0, &s.reqs[0])
	p.entries, p.tp.Decode = appendSpentRow(p.entries, p.tp.Decode, 1, &s.reqs[1])
	p.entries, p.tp.Decode = appendDecodeRow(p.entries, p.tp.Decode, 2, &s.reqs[2])
	if !s.sglSpentOnly(p) {
		t.Fatal("sglSpentOnly: false for a pass whose extra row is a finished request's spent row")
	}
	s.sglDropSpent(p)
	if len(p.entries) != 2 || p.entries[0].r != 0 || p.entries[1].r != 2 || !reflect.DeepEqual(p.tp.Decode, []int{13, 32}) {
		t.Errorf("rows after the drop: entries %+v, contexts %v; want requests 0 and 2 at contexts 13, 32", p.entries, p.tp.Decode)
	}
	if s.kv.batchFull || s.kv.chunkRan || s.kv.runLen != 2 {
		t.Errorf("state after the drop: batch full %v, chunk ran %v, running length %d; want false, false, 2", s.kv.batchFull, s.kv.chunkRan, s.kv.runLen)
	}
	s.reqs[1].finished = false // retracted, not finished: not a spent row
	s.running = []int32{0, 2}
	p.entries, p.tp.Decode = appendSpentRow(p.entries, p.tp.Decode, 1, &s.reqs[1])
	if s.sglSpentOnly(p) {
		t.Error("sglSpentOnly: true for a row of a request that has not finished")
	}
}

// TestSimReqLayout: a request is two 64-byte lines, the fields a pass over the
// running requests touches in the first (simReq's doc comment).
func TestSimReqLayout(t *testing.T) {
	var r simReq
	if size := unsafe.Sizeof(r); size != 128 {
		t.Errorf("simReq is %d bytes; want 128 (two cache lines)", size)
	}
	for name, end := range map[string]uintptr{
		"isl": unsafe.Offsetof(r.isl) + unsafe.Sizeof(r.isl), "osl": unsafe.Offsetof(r.osl) + unsafe.Sizeof(r.osl),
		"c": unsafe.Offsetof(r.c) + unsafe.Sizeof(r.c), "gSched": unsafe.Offsetof(r.gSched) + unsafe.Sizeof(r.gSched),
		"gOut": unsafe.Offsetof(r.gOut) + unsafe.Sizeof(r.gOut), "blocks": unsafe.Offsetof(r.blocks) + unsafe.Sizeof(r.blocks),
		"rec": unsafe.Offsetof(r.rec) + unsafe.Sizeof(r.rec), "last": unsafe.Offsetof(r.last) + unsafe.Sizeof(r.last),
	} {
		if end > 64 {
			t.Errorf("simReq.%s ends at byte %d, outside the first line", name, end)
		}
	}
}
