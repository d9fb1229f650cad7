package queueing

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCountPassesMatchesCountPass: counting n passes at once (a decode stretch in
// bulk) leaves the same count as n single counts, polls a cancelled context once
// the count crosses a multiple of 256 (not before) and enforces the pass bound.
func TestCountPassesMatchesCountPass(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	for _, n := range []int{0, 1, 200, 255, 256, 1000} {
		one := sim{passes: 3, maxPasses: 1 << 30}
		bulk := one
		for range n {
			if err := one.countPass(live); err != nil {
				t.Fatal(err)
			}
		}
		if err := bulk.countPasses(live, n); err != nil {
			t.Fatal(err)
		}
		if one.passes != bulk.passes {
			t.Fatalf("n = %d: countPasses left %d passes, countPass %d", n, bulk.passes, one.passes)
		}
	}
	s := sim{passes: 10, maxPasses: 1 << 30}
	if err := s.countPasses(cancelled, 200); err != nil { // 210: no multiple of 256 crossed
		t.Fatalf("countPasses polled ctx without crossing a multiple of 256: %v", err)
	}
	if err := s.countPasses(cancelled, 100); !errors.Is(err, context.Canceled) { // 310 crosses 256
		t.Fatalf("countPasses across 256 with a cancelled ctx: got %v, want context.Canceled", err)
	}
	s = sim{passes: 10, maxPasses: 100}
	if err := s.countPasses(live, 91); err == nil || !strings.Contains(err.Error(), "pass bound 100") {
		t.Fatalf("countPasses past the bound: got %v, want the pass-bound error", err)
	}
}
