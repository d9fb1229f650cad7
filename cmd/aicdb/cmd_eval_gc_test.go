package main

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the GC percent without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestLoadPhaseGCRestores(t *testing.T) {
	pct, limit := gcPercent(), debug.SetMemoryLimit(-1)
	restore := loadPhaseGC()
	if got := gcPercent(); got != -1 {
		t.Fatalf("GC percent in the load phase = %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != loadPhaseMemoryLimit {
		t.Fatalf("memory limit in the load phase = %d, want %d", got, loadPhaseMemoryLimit)
	}
	inner := loadPhaseGC() // a concurrent load phase leaves the settings alone
	inner()
	if got := gcPercent(); got != -1 {
		t.Fatalf("GC percent after a nested load phase = %d, want -1 until the outer one ends", got)
	}
	restore()
	if got := gcPercent(); got != pct {
		t.Fatalf("GC percent after the load phase = %d, want %d", got, pct)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("memory limit after the load phase = %d, want %d", got, limit)
	}
}

func TestReplayPhaseGCRestores(t *testing.T) {
	pct, limit := gcPercent(), debug.SetMemoryLimit(-1)
	restore := replayPhaseGC()
	if got := gcPercent(); got != replayGCPercent {
		t.Fatalf("GC percent in the replay phase = %d, want %d", got, replayGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("memory limit in the replay phase = %d, want it unchanged (%d)", got, limit)
	}
	restore()
	if got := gcPercent(); got != pct {
		t.Fatalf("GC percent after the replay phase = %d, want %d", got, pct)
	}
}
