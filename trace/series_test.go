package trace

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestSeries: counts, Little's-law areas and the nearest-rank p99 on a hand-worked
// case of two one-minute windows (the last one partial).
func TestSeries(t *testing.T) {
	out := []Outcome{
		{ArrivalMs: 0, FirstTokenMs: 30e3, FinishMs: 60e3},    // queued 30 s, in system all window 0
		{ArrivalMs: 30e3, FirstTokenMs: 30e3, FinishMs: 90e3}, // never queued, spans both windows
		{ArrivalMs: 70e3, FirstTokenMs: 80e3, FinishMs: 90e3}, // window 1 (30 s long)
	}
	got := Series(out, 60e3)
	want := []Window{
		{StartS: 0, Arrivals: 2, Finished: 0, ThroughputRPS: 0, QueueLen: 0.5, InSystem: 1.5, TTFTP99Ms: ptr(30e3)},
		{StartS: 60, Arrivals: 1, Finished: 3, ThroughputRPS: 0.1, QueueLen: 10.0 / 30, InSystem: 1 + 20.0/30, TTFTP99Ms: ptr(10e3)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Series:\n got %+v\nwant %+v", got, want)
	}
	if Series(nil, 60e3) != nil {
		t.Fatal("no outcomes: want no windows")
	}
	if _, err := ByWidth("day"); err == nil || err.Error() != `--by "day": must be second, minute or hour` {
		t.Fatalf("ByWidth(day): %v", err)
	}
}

func ptr(v float64) *float64 { return &v }

// TestSeriesEmptyWindowHasNoTTFT: a window without arrivals reports no TTFT p99
// (null in JSON), not 0.
func TestSeriesEmptyWindowHasNoTTFT(t *testing.T) {
	got := Series([]Outcome{{ArrivalMs: 0, FirstTokenMs: 10, FinishMs: 2500}}, 1000)
	if len(got) != 3 || got[0].TTFTP99Ms == nil || *got[0].TTFTP99Ms != 10 || got[1].TTFTP99Ms != nil || got[2].TTFTP99Ms != nil {
		t.Fatalf("windows %+v: want a TTFT in window 0 only", got)
	}
	b, err := json.Marshal(got[1])
	if err != nil || !strings.Contains(string(b), `"ttft_p99_ms":null`) {
		t.Fatalf("empty window JSON %s (%v): want ttft_p99_ms null", b, err)
	}
}
