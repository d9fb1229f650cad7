package refine

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestSyntheticParetoGolden pins the default agg sweep's pareto frontier with the
// synthetic evaluator: the search space, the row keys and the frontier flag, end to
// end through the store. Regenerate with `go test ./refine -run Golden -update`.
func TestSyntheticParetoGolden(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	if _, err := Sweep(ctx, s, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	pts, err := s.SelectPoints(ctx, store.PointFilter{ParetoOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintln(&b, "key12,parallel,batch,ctx_tokens,tokens_per_s_per_gpu,tokens_per_s_per_user,ttft_steady_p99")
	for _, p := range pts {
		fmt.Fprintf(&b, "%s,%s,%d,%d,%.6g,%.6g,%.6g\n", p.Key[:12], p.Parallel(), p.Batch, p.CtxTokens,
			p.Legacy.TokensPerSPerGPU, p.Legacy.TokensPerSPerUser, p.Q.V[store.QTTFTSteadyP99])
	}
	path := filepath.Join("testdata", "synthetic_pareto.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("pareto frontier differs from %s (run with -update if intended):\n%s", path, b.String())
	}
}

func FuzzParsePercentile(f *testing.F) {
	for _, s := range []string{"p99", "P999", "avg", "mean", " p50 ", "", "p98", "99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePercentile(s)
		if err != nil {
			if !strings.Contains(err.Error(), "unknown percentile") {
				t.Fatalf("error %q does not name the problem", err)
			}
			return
		}
		if _, err := columnFor(TTFT, p); err != nil {
			t.Fatalf("parsed %q to %q with no TTFT column: %v", s, p, err)
		}
	})
}
