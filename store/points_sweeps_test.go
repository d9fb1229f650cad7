package store

import (
	"context"
	"testing"
)

// TestSweepAbandonedMarkedInterrupted: a sweep left running (its process was killed
// before EndSweep) is marked interrupted, ended_at NULL, when the next one begins;
// finished sweeps are untouched.
func TestSweepAbandonedMarkedInterrupted(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	done, _, err := s.BeginSweep(ctx, `{}`, "2026-01-01T00:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EndSweep(ctx, SweepRecord{ID: done, EndedAt: "2026-01-01T00:00:01Z", Status: SweepDone}); err != nil {
		t.Fatal(err)
	}
	killed, ab, err := s.BeginSweep(ctx, `{}`, "2026-01-01T00:00:02Z")
	if err != nil || ab != 0 {
		t.Fatalf("begin: abandoned %d, err %v", ab, err)
	}
	// killed's process dies here: no EndSweep.
	next, ab, err := s.BeginSweep(ctx, `{}`, "2026-01-01T00:00:03Z")
	if err != nil || ab != 1 {
		t.Fatalf("begin after a kill: abandoned %d (want 1), err %v", ab, err)
	}
	rs, err := s.Sweeps(ctx)
	if err != nil || len(rs) != 3 {
		t.Fatalf("sweeps: %+v %v", rs, err)
	}
	want := []struct {
		id            int64
		status, ended string
	}{{done, SweepDone, "2026-01-01T00:00:01Z"}, {killed, SweepInterrupted, ""}, {next, SweepRunning, ""}}
	for i, w := range want {
		if rs[i].ID != w.id || rs[i].Status != w.status || rs[i].EndedAt != w.ended {
			t.Errorf("sweep %d: %+v, want status %s ended_at %q", w.id, rs[i], w.status, w.ended)
		}
	}
	if rs[1].Error != AbandonedSweepError {
		t.Errorf("abandoned sweep error %q", rs[1].Error)
	}
}
