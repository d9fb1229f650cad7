package oracle

import (
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateReuse = flag.Bool("update-reuse", false, "rewrite testdata/reuse_mooncake_hits.golden")

// TestReuseMooncakeHitsGolden pins every request's hit on the Mooncake conversation
// sample (../shared, skipped when absent) for the vLLM cache at several KV budgets and
// block sizes (48 does not divide the 512-token hash block), released at once (Expect + Add, Add alone) and pinned until a
// synthetic finish (Pinned): a digest of the 12,031 hits and their sum per case, so a
// faster cache cannot change a single hit unnoticed.
func TestReuseMooncakeHitsGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 12k requests per case")
	}
	rows := readMooncakeConversation(t)
	reqs := make([]ReuseRequest, len(rows))
	for i, r := range rows {
		// run time: a prefill of 0.05 ms per token and 30 ms per output token
		reqs[i] = ReuseRequest{ArrivalMs: r.At, FinishMs: r.At + 0.05*float64(r.In) + 30*float64(r.Out),
			ISL: r.In, OSL: r.Out, HashIDs: r.IDs}
	}
	var b strings.Builder
	digest := func(name string, hits []int) {
		h := fnv.New64a()
		sum := 0
		for _, x := range hits {
			fmt.Fprintf(h, "%d,", x)
			sum += x
		}
		fmt.Fprintf(&b, "%s sum %d fnv %016x\n", name, sum, h.Sum64())
	}
	for _, c := range []struct {
		be     Backend
		kv, bs int
		plain  bool // also Add without Expect
	}{
		{VLLM, 100000, 16, false}, {VLLM, 20000, 16, false}, {VLLM, 3000, 16, true}, {VLLM, 50000, 48, false},
	} {
		cfg := ReuseConfig{Backend: c.be, KVBlocks: c.kv, BlockSize: c.bs, HashBlock: 512}
		name := fmt.Sprintf("%s kv %d bs %d", c.be, c.kv, c.bs)
		s, err := NewReuse(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			s.Expect(r.IDs)
		}
		hits := make([]int, len(rows))
		for i, r := range rows {
			hits[i] = s.Add(r.In, r.Out, r.IDs)
		}
		digest(name+" expect+add", hits)
		if c.plain {
			p, _ := NewReuse(cfg)
			for i, r := range rows {
				hits[i] = p.Add(r.In, r.Out, r.IDs)
			}
			digest(name+" add", hits)
		}
		pin, err := s.Pinned(reqs)
		if err != nil {
			t.Fatal(err)
		}
		digest(name+" pinned", pin)
	}
	path := filepath.Join("testdata", "reuse_mooncake_hits.golden")
	if *updateReuse {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("hits changed:\n got %s\nwant %s", b.String(), want)
	}
}
