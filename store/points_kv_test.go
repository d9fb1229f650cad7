package store

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// kvPoint is testPoint at batch b with KV columns: preempts > 0 marks a KV-tight
// row whose steady state preempts.
func kvPoint(b int, x, y, preempts float64) Point {
	return kvPointIn(testInputs(), b, x, y, preempts)
}

// kvPointIn is kvPoint of in's deployment and workload group.
func kvPointIn(in PointInputs, b int, x, y, preempts float64) Point {
	in.Batch = b
	p := testPoint(in, x, y)
	p.Q.KV = KV{CapacityTokens: 65536, UtilPeak: 0.5, HasUtil: true, PreemptionsPerRequest: preempts,
		HasPreemptions: true, Note: "test"}
	return p
}

func paretoKeys(t *testing.T, s *Store, view string) map[string]int {
	t.Helper()
	var rows []struct {
		Key      string `db:"key"`
		Preempts *int   `db:"preempts"`
	}
	if err := s.db.SelectContext(context.Background(), &rows, `SELECT key, preempts FROM `+view); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Key] = -1
		if r.Preempts != nil {
			out[r.Key] = *r.Preempts
		}
	}
	return out
}

// TestKVColumnsAndPreemptingPareto: the KV columns round-trip; a preempting row
// that would dominate is off the `pareto` front (the row it dominated is back on
// it) and on `pareto_all` with preempts = 1; a quantitative result that reveals
// preemption takes its row off the front too — in a fixed-shape group, a trace
// workload's and a deployed version's alike (the refresh reads the row's group).
func TestKVColumnsAndPreemptingPareto(t *testing.T) {
	trace, deployed := testInputs(), testInputs()
	trace.Workload = `{"trace":"t"}`
	deployed.Deployed = "0.17.0"
	for name, in := range map[string]PointInputs{"fixed shape": testInputs(), "trace workload": trace, "deployed version": deployed} {
		t.Run(name, func(t *testing.T) { testPreemptingPareto(t, in) })
	}
}

func testPreemptingPareto(t *testing.T, in PointInputs) {
	ctx := context.Background()
	s := openTest(t)
	fast := kvPointIn(in, 64, 50, 900, 0.25) // dominates slow, but preempts
	slow := kvPointIn(in, 32, 40, 800, 0)
	other := kvPointIn(in, 16, 60, 500, 0)
	if _, err := s.InsertPoints(ctx, []Point{fast, slow, other}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SelectPoints(ctx, PointFilter{Keys: []string{fast.Key}})
	if err != nil || len(got) != 1 {
		t.Fatalf("read back: %v, %d rows", err, len(got))
	}
	if got[0].Q.KV != fast.Q.KV {
		t.Fatalf("KV read back %+v, want %+v", got[0].Q.KV, fast.Q.KV)
	}
	front := paretoKeys(t, s, "pareto")
	if _, ok := front[fast.Key]; ok || front[slow.Key] != 0 || front[other.Key] != 0 || len(front) != 2 {
		t.Fatalf("pareto = %v: want slow and other, not the preempting row", front)
	}
	all := paretoKeys(t, s, "pareto_all")
	if all[fast.Key] != 1 || all[other.Key] != 0 || len(all) != 2 {
		t.Fatalf("pareto_all = %v: want the preempting row flagged and other", all)
	}

	// other turns out to preempt once refined: it leaves the front.
	q := Quantitative{Key: other.Key, Fidelity: "W0", Evaluator: "test-1",
		KV: KV{CapacityTokens: 65536, UtilPeak: 1, HasUtil: true, PreemptionsPerRequest: 1.5, HasPreemptions: true}}
	if err := s.InsertQuantitative(ctx, []Quantitative{q}); err != nil {
		t.Fatal(err)
	}
	front = paretoKeys(t, s, "pareto")
	if len(front) != 1 || front[slow.Key] != 0 {
		t.Fatalf("pareto after a preempting quantitative result = %v: want slow only", front)
	}
	var note string
	if err := s.db.GetContext(ctx, &note, `SELECT kv_note FROM points WHERE key = ?`, other.Key); err != nil || note != "quantitative" {
		t.Fatalf("kv_note of the refined row = %q, %v", note, err)
	}
}

// TestKVValidate: out-of-range KV values are refused before they are stored.
func TestKVValidate(t *testing.T) {
	for _, k := range []KV{
		{UtilPeak: 1.5, HasUtil: true},
		{UtilPeak: -0.1, HasUtil: true},
		{PreemptionsPerRequest: -1, HasPreemptions: true},
		{CapacityTokens: -16},
	} {
		p := kvPoint(8, 10, 10, 0)
		p.Q.KV = k
		err := p.Validate()
		if err == nil || !slices.ContainsFunc([]string{"kv_util_peak", "preemptions_per_request", "kv_capacity_tokens"},
			func(c string) bool { return strings.Contains(err.Error(), c) }) {
			t.Fatalf("%+v: got %v, want an error naming the column", k, err)
		}
	}
}
