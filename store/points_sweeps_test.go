package store

import (
	"context"
	"errors"
	"testing"
)

// never and always are lease-holder liveness verdicts for tests.
func never(SweepLease) bool  { return false }
func always(SweepLease) bool { return true }

func testStart(at string, groups ...Group) SweepStart {
	return SweepStart{Arguments: `{}`, StartedAt: at, PointsTotal: 7, Host: "h", PID: 42, Groups: groups}
}

// TestSweepAbandonedMarkedInterrupted: a sweep left running (its process was killed
// before EndSweep) is marked interrupted, ended_at NULL, when the next one begins
// and finds its lease holder gone; finished sweeps are untouched.
func TestSweepAbandonedMarkedInterrupted(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	g := Group{Model: "m"}
	done, _, _, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:00Z", g), never)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EndSweep(ctx, SweepRecord{ID: done, EndedAt: "2026-01-01T00:00:01Z", Status: SweepDone}); err != nil {
		t.Fatal(err)
	}
	killed, ab, h, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:02Z", g), never)
	if err != nil || ab != 0 || h != nil {
		t.Fatalf("begin: abandoned %d, holder %v, err %v", ab, h, err)
	}
	// killed's process dies here: no EndSweep.
	next, ab, h, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:03Z", g), always)
	if err != nil || ab != 1 || h != nil {
		t.Fatalf("begin after a kill: abandoned %d (want 1), holder %v, err %v", ab, h, err)
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
	ls, err := s.SweepLeases(ctx)
	if err != nil || len(ls) != 1 || ls[0].SweepID != next {
		t.Fatalf("leases after the kill: %+v %v, want only sweep %d's", ls, err, next)
	}
}

// TestSweepLeaseLiveHolder: while a live sweep holds a lease on a group, a second
// sweep of that group is not recorded (BeginSweep returns the holder) and the first
// is not marked interrupted; a sweep of other groups starts alongside; once the
// first ends, its lease is released and the second starts.
func TestSweepLeaseLiveHolder(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	g1, g2 := Group{Model: "m", ISL: 1}, Group{Model: "m", ISL: 2}
	first, _, _, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:00Z", g1), never)
	if err != nil {
		t.Fatal(err)
	}
	id, ab, h, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:01Z", g2, g1), never)
	if err != nil || id != 0 || ab != 0 || h == nil {
		t.Fatalf("second sweep of g1: id %d abandoned %d holder %v err %v, want the holder", id, ab, h, err)
	}
	if h.SweepID != first || h.Host != "h" || h.PID != 42 || h.Heartbeat != "2026-01-01T00:00:00Z" || len(h.Groups) != 1 || h.Groups[0] != g1 {
		t.Fatalf("holder %+v", *h)
	}
	other, ab, h, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:02Z", g2), never)
	if err != nil || other == 0 || ab != 0 || h != nil {
		t.Fatalf("sweep of g2: id %d abandoned %d holder %v err %v", other, ab, h, err)
	}
	if err := s.HeartbeatSweep(ctx, first, "2026-01-01T00:00:05Z"); err != nil {
		t.Fatal(err)
	}
	ls, _ := s.SweepLeases(ctx)
	if len(ls) != 2 || ls[0].Heartbeat != "2026-01-01T00:00:05Z" {
		t.Fatalf("leases after a heartbeat: %+v", ls)
	}
	if err := s.EndSweep(ctx, SweepRecord{ID: first, EndedAt: "2026-01-01T00:00:06Z", Status: SweepDone, PointsTotal: 7}); err != nil {
		t.Fatal(err)
	}
	second, ab, h, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:07Z", g1), never)
	if err != nil || second == 0 || ab != 0 || h != nil {
		t.Fatalf("after the first ended: id %d abandoned %d holder %v err %v", second, ab, h, err)
	}
	rs, _ := s.Sweeps(ctx)
	if len(rs) != 3 || rs[0].Status != SweepDone || rs[1].Status != SweepRunning || rs[2].Status != SweepRunning {
		t.Fatalf("sweeps: %+v", rs)
	}
	for _, r := range rs {
		if r.PointsTotal != 7 {
			t.Errorf("sweep %d: points_total %d, want 7 (set at start)", r.ID, r.PointsTotal)
		}
	}
}

// TestSweepLeaseLost: a heartbeat after a later sweep released the lease (its holder
// judged gone) reports ErrLeaseLost.
func TestSweepLeaseLost(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	g := Group{Model: "m"}
	stale, _, _, err := s.BeginSweep(ctx, testStart("2026-01-01T00:00:00Z", g), never)
	if err != nil {
		t.Fatal(err)
	}
	if _, ab, _, err := s.BeginSweep(ctx, testStart("2026-01-01T01:00:00Z", g), always); err != nil || ab != 1 {
		t.Fatalf("abandoned %d, err %v", ab, err)
	}
	if err := s.HeartbeatSweep(ctx, stale, "2026-01-01T01:00:01Z"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("heartbeat of a released lease: %v, want ErrLeaseLost", err)
	}
}
