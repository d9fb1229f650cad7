package refine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aicdb/aicdb/store"
)

// gated counts Legacy evaluations; the first one signals started and every one
// blocks until release is closed.
type gated struct {
	Synthetic
	n        *atomic.Int64
	once     *sync.Once
	started  chan struct{}
	release  chan struct{}
	blocking bool
}

func newGated(blocking bool) gated {
	return gated{n: new(atomic.Int64), once: new(sync.Once), started: make(chan struct{}), release: make(chan struct{}), blocking: blocking}
}

func (g gated) Legacy(ctx context.Context, in store.PointInputs) (store.Legacy, error) {
	g.n.Add(1)
	if g.blocking {
		g.once.Do(func() { close(g.started) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return store.Legacy{}, ctx.Err()
		}
	}
	return g.Synthetic.Legacy(ctx, in)
}

// tickClock is a clock that advances one second per reading.
func tickClock() func() time.Time {
	var mu sync.Mutex
	t := fixedNow()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

// TestSweepTwoAtOnce runs two sweeps of the same points on one store file (two
// handles, as two processes would) while the first is mid-way: the second waits for
// the first's lease, then reuses its rows. Every point is evaluated once in total,
// both sweeps end done (neither is marked interrupted), and the first's lease
// heartbeat is refreshed while it runs. On main both evaluated every point and the
// second marked the first interrupted ("killed process").
func TestSweepTwoAtOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "two.sqlite")
	open := func() *store.Store {
		s, err := store.Open(ctx, path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1, s2 := open(), open()
	ev := newGated(true)
	type out struct {
		res SweepResult
		err error
	}
	first := make(chan out, 1)
	go func() {
		res, err := Sweep(ctx, s1, ev, defaultSpec(), SweepOptions{Now: tickClock(), BatchSize: 64, Heartbeat: time.Millisecond})
		first <- out{res, err}
	}()
	<-ev.started
	// The first sweep holds its lease and is blocked mid-batch: its heartbeat moves.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, err := s2.SweepLeases(ctx)
		if err != nil || len(ls) != 1 {
			t.Fatalf("leases while the first sweep runs: %+v %v", ls, err)
		}
		if ls[0].Heartbeat != "2026-01-01T00:00:01Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running sweep never refreshed its lease heartbeat")
		}
		time.Sleep(time.Millisecond)
	}
	var waited []store.SweepLease
	res2, err := Sweep(ctx, s2, ev, defaultSpec(), SweepOptions{Now: tickClock(), LeasePoll: time.Millisecond,
		OnWait: func(h store.SweepLease) { waited = append(waited, h); close(ev.release) }})
	if err != nil {
		t.Fatal(err)
	}
	r1 := <-first
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	if len(waited) != 1 || waited[0].SweepID != r1.res.SweepID || waited[0].PID != os.Getpid() {
		t.Fatalf("OnWait calls %+v, want one naming sweep %d", waited, r1.res.SweepID)
	}
	if n := ev.n.Load(); n != int64(r1.res.Total) {
		t.Errorf("%d evaluations for %d points: want each point evaluated once", n, r1.res.Total)
	}
	if r1.res.Evaluated != r1.res.Total || res2.Evaluated != 0 || res2.Skipped != res2.Total || res2.WaitedFor != r1.res.SweepID {
		t.Errorf("first %+v, second %+v: want the second to reuse every row of the first", r1.res, res2)
	}
	if r1.res.Abandoned != 0 || res2.Abandoned != 0 {
		t.Errorf("abandoned %d, %d: a live sweep was marked interrupted", r1.res.Abandoned, res2.Abandoned)
	}
	sw, err := s1.Sweeps(ctx)
	if err != nil || len(sw) != 2 || sw[0].Status != store.SweepDone || sw[1].Status != store.SweepDone || sw[0].Error != "" {
		t.Fatalf("sweeps: %+v %v", sw, err)
	}
	if ls, _ := s1.SweepLeases(ctx); len(ls) != 0 {
		t.Fatalf("leases left after both ended: %+v", ls)
	}
}

// TestSweepLeaseLostStops: a sweep whose lease a later sweep released (judging it
// gone) stops at its next heartbeat with store.ErrLeaseLost and records failed.
func TestSweepLeaseLostStops(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	ev := newGated(true)
	done := make(chan error, 1)
	go func() {
		_, err := Sweep(ctx, s, ev, defaultSpec(), SweepOptions{Now: fixedNow, Heartbeat: time.Millisecond})
		done <- err
	}()
	<-ev.started
	// Another sweep (of other points) judges every lease holder gone.
	other, ab, _, err := s.BeginSweep(ctx, store.SweepStart{Arguments: `{}`, StartedAt: "2026-01-01T01:00:00Z", Host: "h", PID: 1},
		func(store.SweepLease) bool { return true })
	if err != nil || ab != 1 {
		t.Fatalf("abandoned %d, err %v", ab, err)
	}
	err = <-done
	close(ev.release)
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("sweep after losing its lease: %v, want ErrLeaseLost", err)
	}
	sw, _ := s.Sweeps(ctx)
	if len(sw) != 2 || sw[0].Status != store.SweepFailed || sw[1].ID != other {
		t.Fatalf("sweeps: %+v", sw)
	}
}

func TestLeaseHolderGone(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	alive := func(pid int) bool { return pid == 7 }
	for _, c := range []struct {
		host      string
		pid       int
		heartbeat string
		want      bool
	}{
		{"here", 7, "2026-01-01T00:09:59Z", false},            // live process, fresh heartbeat
		{"here", 8, "2026-01-01T00:09:59Z", true},             // same host, process gone (kill -9)
		{"there", 8, "2026-01-01T00:09:59Z", false},           // other host: the heartbeat decides
		{"there", 8, "2026-01-01T00:08:00Z", false},           // exactly the timeout old
		{"there", 8, "2026-01-01T00:07:59.999Z", true},        // older than the timeout
		{"here", 7, "2026-01-01T00:00:00Z", true},             // live pid but no heartbeat for 10 min (pid reused)
		{"there", 8, "not a time", true},                      // unreadable heartbeat
		{"there", 8, "2026-01-01T00:09:59.123456789Z", false}, // nanoseconds, as written
	} {
		l := store.SweepLease{Host: c.host, PID: c.pid, Heartbeat: c.heartbeat}
		if got := LeaseHolderGone(l, "here", alive, now, 2*time.Minute); got != c.want {
			t.Errorf("%+v: gone %v, want %v", c, got, c.want)
		}
	}
}

func TestProcessAlive(t *testing.T) {
	if !ProcessAlive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	if ProcessAlive(0) || ProcessAlive(-1) {
		t.Error("pid ≤ 0 alive")
	}
}
