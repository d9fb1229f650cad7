package trace

import (
	"reflect"
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
		{StartS: 0, Arrivals: 2, Finished: 0, ThroughputRPS: 0, QueueLen: 0.5, InSystem: 1.5, TTFTP99Ms: 30e3},
		{StartS: 60, Arrivals: 1, Finished: 3, ThroughputRPS: 0.1, QueueLen: 10.0 / 30, InSystem: 1 + 20.0/30, TTFTP99Ms: 10e3},
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
