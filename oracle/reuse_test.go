package oracle

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
)

func newReuseT(t testing.TB, b engine.Backend, kv, bs int) *ReuseSim {
	t.Helper()
	s, err := NewReuse(ReuseConfig{Backend: b, KVBlocks: kv, BlockSize: bs, HashBlock: 512})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReuseRepeat: a prompt repeated hits what each engine's rule allows: vLLM whole
// blocks below isl − 1 (V-R8), SGLang isl − 1 tokens in pages, TRT-LLM isl − 1 (T-R5,
// partial reuse).
func TestReuseRepeat(t *testing.T) {
	ids := []int64{7, 8, 9}
	for _, c := range []struct {
		b        engine.Backend
		bs, isl  int
		wantHit2 int
	}{
		{engine.VLLM, 16, 1300, 1296},  // floor(1299/16)·16
		{engine.VLLM, 16, 1024, 1008},  // block-aligned prompt recomputes its whole last block
		{engine.SGLang, 1, 1300, 1299}, // isl − 1
		{engine.SGLang, 64, 1300, 1280},
		{engine.TRTLLM, 32, 1300, 1299},
	} {
		s := newReuseT(t, c.b, 1<<16, c.bs)
		ids := ids[:(c.isl+511)/512]
		if h := s.Add(c.isl, 10, ids); h != 0 {
			t.Errorf("%s: first request hit %d, want 0", c.b, h)
		}
		if h := s.Add(c.isl, 10, ids); h != c.wantHit2 {
			t.Errorf("%s bs %d isl %d: repeat hit %d, want %d", c.b, c.bs, c.isl, h, c.wantHit2)
		}
		if h := s.Add(c.isl, 10, []int64{1, 8, 9}[:len(ids)]); h != 0 {
			t.Errorf("%s: other first block hit %d, want 0 (a block's identity includes its prefix)", c.b, h)
		}
	}
}

// TestReuseEviction: with room for one prompt, a second distinct prompt evicts the
// first (LRU), so the first no longer hits; with room for both it does.
func TestReuseEviction(t *testing.T) {
	for _, c := range []struct {
		b         engine.Backend
		small     int
		big       int
		bs        int
		wantBig   int
		wantSmall int
	}{
		{engine.VLLM, 70, 200, 16, 1008, 80}, // tail-first eviction (§2.5) keeps the first 5 blocks
		{engine.SGLang, 1100, 3000, 1, 1023, 0},
		{engine.TRTLLM, 36, 100, 32, 1023, 0},
	} {
		run := func(kv int) int {
			s := newReuseT(t, c.b, kv, c.bs)
			s.Add(1024, 16, []int64{1, 2})
			s.Add(1024, 16, []int64{3, 4})
			return s.Add(1024, 16, []int64{1, 2})
		}
		if h := run(c.big); h != c.wantBig {
			t.Errorf("%s kv %d: hit %d, want %d", c.b, c.big, h, c.wantBig)
		}
		if h := run(c.small); h != c.wantSmall {
			t.Errorf("%s kv %d: hit %d, want %d after eviction", c.b, c.small, h, c.wantSmall)
		}
	}
}

// TestReuseProperties: hits never exceed isl − 1 nor the shared identified prefix;
// vLLM hits are whole blocks, SGLang whole pages; the same stream gives the same hits.
func TestReuseProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SampledFrom([]engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM}).Draw(t, "backend")
		bs := rapid.SampledFrom([]int{1, 16, 32, 48, 64}).Draw(t, "bs")
		kv := rapid.IntRange(1, 5000).Draw(t, "kv")
		n := rapid.IntRange(1, 30).Draw(t, "n")
		type req struct {
			isl, osl int
			ids      []int64
		}
		var reqs []req
		for i := range n {
			isl := rapid.IntRange(1, 3000).Draw(t, fmt.Sprintf("isl%d", i))
			ids := make([]int64, (isl+511)/512)
			for k := range ids {
				ids[k] = int64(rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("id%d_%d", i, k)))
			}
			reqs = append(reqs, req{isl, rapid.IntRange(1, 500).Draw(t, fmt.Sprintf("osl%d", i)), ids})
		}
		run := func(expect bool) []int {
			s, err := NewReuse(ReuseConfig{Backend: b, KVBlocks: kv, BlockSize: bs, HashBlock: 512})
			if err != nil {
				t.Fatal(err)
			}
			if expect {
				for _, r := range reqs {
					s.Expect(r.ids)
				}
			}
			var out []int
			for _, r := range reqs {
				out = append(out, s.Add(r.isl, r.osl, r.ids))
			}
			return out
		}
		a, a2, ae := run(false), run(false), run(true)
		for i, h := range a {
			r := reqs[i]
			if h < 0 || h > max(0, r.isl-1) {
				t.Fatalf("request %d: hit %d outside 0..isl−1 = %d", i, h, r.isl-1)
			}
			if (b == engine.VLLM || b == engine.SGLang) && h%bs != 0 {
				t.Fatalf("request %d: %s hit %d not a multiple of %d", i, b, h, bs)
			}
			if i == 0 && h != 0 {
				t.Fatalf("first request hit %d", h)
			}
			if h != a2[i] {
				t.Fatalf("request %d: hit %d then %d on the same stream", i, h, a2[i])
			}
			if h != ae[i] {
				t.Fatalf("request %d: hit %d, but %d when the stream was announced (Expect)", i, h, ae[i])
			}
		}
	})
}

// mooncakeRow is one request of the Mooncake sample.
type mooncakeRow struct {
	At  float64 `json:"timestamp"`
	In  int     `json:"input_length"`
	Out int     `json:"output_length"`
	IDs []int64 `json:"hash_ids"`
}

// readMooncakeConversation reads the Mooncake conversation sample from ../shared, or
// skips.
func readMooncakeConversation(t testing.TB) []mooncakeRow {
	t.Helper()
	f, err := os.Open("../../shared/data/traces/mooncake/conversation_trace.jsonl")
	if err != nil {
		t.Skip("no ../shared/data/traces")
	}
	defer f.Close()
	var rows []mooncakeRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var r mooncakeRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestReuseMooncakeConversation compares the oracle's hit fraction on the Mooncake
// conversation trace (../shared, skipped when absent) with the trace's own reuse: an
// unbounded vLLM/SGLang/TRT-LLM cache reaches the trace's 37.36 % of prompt tokens
// (docs/traces.md explains the gap to the ~40 % Mooncake publishes); a one-GPU budget
// reaches far less.
func TestReuseMooncakeConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 12k requests")
	}
	rows := readMooncakeConversation(t)
	frac := func(b engine.Backend, kv int) float64 {
		s := newReuseT(t, b, kv, 0)
		for _, r := range rows {
			s.Expect(r.IDs)
		}
		var hit, tot int
		for _, r := range rows {
			hit += s.Add(r.In, r.Out, r.IDs)
			tot += r.In
		}
		return float64(hit) / float64(tot)
	}
	for _, c := range []struct {
		b    engine.Backend
		kv   int
		want string
	}{
		{engine.SGLang, 1 << 28, "0.3736"},
		{engine.TRTLLM, 1 << 24, "0.3736"},
		{engine.VLLM, 100000, "0.0680"},
	} {
		if got := fmt.Sprintf("%.4f", frac(c.b, c.kv)); got != c.want {
			t.Errorf("%s kv %d: hit fraction %s, want %s", c.b, c.kv, got, c.want)
		}
	}
}

func BenchmarkReuseVLLM(b *testing.B) {
	ids := make([]int64, 24)
	for i := 0; b.Loop(); i++ {
		s := newReuseT(b, engine.VLLM, 100000, 16)
		for j := range 200 {
			for k := range ids {
				ids[k] = int64(k + (j%7)*100*min(k, 1))
			}
			s.Add(12000, 300, ids)
		}
	}
}

// BenchmarkReuseVLLMMooncake replays the Mooncake conversation sample (12,031
// requests) through a 100,000-block vLLM pool: the reuse oracle's share of
// `aicdb trace replay --tier quantitative`.
func BenchmarkReuseVLLMMooncake(b *testing.B) {
	rows := readMooncakeConversation(b)
	for b.Loop() {
		s := newReuseT(b, engine.VLLM, 100000, 16)
		for _, r := range rows {
			s.Expect(r.IDs)
		}
		for _, r := range rows {
			s.Add(r.In, r.Out, r.IDs)
		}
	}
}
