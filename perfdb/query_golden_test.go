package perfdb

// query_golden_test.go pins a few hundred query answers on h200_sxm vllm
// 0.24.0 (every kind, every mode, interior, hold, transfer and miss paths)
// in testdata/interp/h200_vllm_0240.json, so any change to the engine shows
// up as a diff. Regenerate with: go test ./perfdb -run TestQueryGolden
// -update-queries (then review the diff against aiconfigurator's rules).

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var updateQueries = flag.Bool("update-queries", false, "rewrite testdata/interp/*.json from the current query answers")

// qtGoldenRow is one pinned answer.
type qtGoldenRow struct {
	Query  string  `json:"query"`
	Ms     float64 `json:"latency_ms"`
	Source string  `json:"source,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// qtGoldenQueries enumerates the pinned queries for one mode view.
func qtGoldenQueries(q *Querier) []qtGoldenRow {
	var rows []qtGoldenRow
	add := func(name string, p Perf, err error) {
		r := qtGoldenRow{Query: fmt.Sprintf("%s %s", q.Mode(), name)}
		if err != nil {
			r.Error = fmt.Sprintf("%T", err)
		} else {
			r.Ms, r.Source = p.LatencyMs, p.Source.String()
		}
		rows = append(rows, r)
	}
	for _, quant := range []GemmQuant{GemmBF16, GemmFP8, GemmFP8Block, GemmFP8Static, GemmInt4WO} {
		for _, m := range []int{1, 7, 100, 1000, 5000, 70000} {
			for _, nk := range [][2]int{{10240, 5120}, {5120, 3200}, {18944, 5120}, {151936 / 8, 5120}, {48, 48}} {
				p, err := q.GemmOp(quant, m, nk[0], nk[1], nk[0] == 5120)
				add(fmt.Sprintf("gemm %s m=%d n=%d k=%d", quant, m, nk[0], nk[1]), p, err)
			}
		}
	}
	for _, b := range []int{1, 3, 64} {
		for _, s := range []int{1, 700, 3000, 20000} {
			for _, pre := range []int{0, 512} {
				for _, kv := range []KVQuant{KVBF16, KVFP8} {
					p, err := q.ContextAttention(b, s, pre, 8, 1, 128, 0, kv, FMHABF16)
					add(fmt.Sprintf("ctx b=%d s=%d prefix=%d kv=%s", b, s, pre, kv), p, err)
				}
			}
		}
	}
	for _, b := range []int{1, 5, 300} {
		for _, s := range []int{2, 1000, 5000, 300000} {
			for _, nh := range [][2]int{{8, 1}, {4, 4}, {5, 1}} {
				p, err := q.GenerationAttention(b, s, nh[0], nh[1], 128, 0, KVBF16)
				add(fmt.Sprintf("gen b=%d s=%d n=%d nkv=%d", b, s, nh[0], nh[1]), p, err)
			}
		}
	}
	for _, tp := range []int{2, 4, 8, 16} {
		for _, size := range []float64{64, 5120, 3e6, 1e9} {
			p, err := q.CustomAllReduce(CommHalf, tp, size)
			add(fmt.Sprintf("allreduce tp=%d size=%g", tp, size), p, err)
			for _, op := range []string{NCCLAllGather, NCCLAllReduce, NCCLAllToAll, NCCLReduceScatter} {
				p, err := q.NCCL(CommHalf, tp, op, size)
				add(fmt.Sprintf("nccl %s g=%d size=%g", op, tp, size), p, err)
			}
		}
	}
	for _, a := range []MoEArgs{
		{Quant: MoEBF16, Distribution: "power_law_1.2", TopK: 8, NumExperts: 128, Hidden: 2048, Inter: 768, MoETP: 1, MoEEP: 8, IsGated: true},
		{Quant: MoEFP8, Distribution: "power_law_1.2", TopK: 8, NumExperts: 128, Hidden: 4096, Inter: 1536, MoETP: 1, MoEEP: 8, IsGated: true},
		{Quant: MoEBF16, Distribution: "nonexistent", TopK: 8, NumExperts: 128, Hidden: 2048, Inter: 800, MoETP: 1, MoEEP: 8, IsGated: true},
	} {
		for _, tok := range []int{1, 77, 1000, 100000} {
			p, err := q.MoE(a, tok)
			add(fmt.Sprintf("moe %s %s h=%d i=%d tokens=%d", a.Quant, a.Distribution, a.Hidden, a.Inter, tok), p, err)
		}
	}
	return rows
}

func TestQueryGolden(t *testing.T) {
	base := qtQuerier(t, "h200_sxm", "vllm", "0.24.0", ModeSilicon)
	var got []qtGoldenRow
	for _, mode := range []DatabaseMode{ModeSilicon, ModeHybrid, ModeEmpirical, ModeSOL} {
		q, _ := base.WithMode(mode)
		got = append(got, qtGoldenQueries(q)...)
	}
	path := filepath.Join("testdata", "interp", "h200_vllm_0240.json")
	if *updateQueries {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate with -update-queries)", err)
	}
	var want []qtGoldenRow
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(want) != len(got) {
		t.Fatalf("%s has %d rows, the test produces %d; regenerate with -update-queries", path, len(want), len(got))
	}
	bad := 0
	for i := range got {
		w, g := want[i], got[i]
		same := w.Query == g.Query && w.Error == g.Error && w.Source == g.Source &&
			math.Abs(w.Ms-g.Ms) <= 1e-12*math.Max(math.Abs(w.Ms), 1e-300)
		if !same {
			bad++
			if bad <= 20 {
				t.Errorf("%s: got %v %s %s, want %v %s %s", g.Query, g.Ms, g.Source, g.Error, w.Ms, w.Source, w.Error)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d pinned answers changed", bad, len(got))
	}
}
