package gate_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/store/measure"
)

// TestSiliconClosingTable reproduces the closing table of docs/queueing.md §7: the
// quantitative tier's steady TTFT mean and TPOT mean on the 44 rows of
// ../shared/data/measurements-dev/silicon_dev.csv (Llama-3.1-70B fp8, h200_sxm,
// isl = osl = 1024, closed loop at C = batch_size), timing perfdb.PassTiming over the
// embedded data (newest version per backend, the row's gemm quant, fp8 KV), engine
// DefaultEngine(backend, ""), and prints per backend the median / min / max relative
// error. Report only: nothing is fitted to these rows. AICDB_SILICON_REPORT=1 runs
// it; AICDB_SILICON_OPTIONS=burst uses the exact burst semantics (Options{}) instead
// of the defaults.
func TestSiliconClosingTable(t *testing.T) {
	if os.Getenv("AICDB_SILICON_REPORT") == "" {
		t.Skip("set AICDB_SILICON_REPORT=1 to print the closing table against silicon_dev.csv")
	}
	rows, err := measure.ParseFile(filepath.Join("..", "..", "..", "shared", "data", "measurements-dev", "silicon_dev.csv"), measure.FormatAICSilicon, measure.Deployment{})
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("measured sample not found: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := perfdb.EmbeddedModel("meta-llama/Meta-Llama-3.1-70B")
	if err != nil {
		t.Fatal(err)
	}
	opt := siliconOptions()
	type errs struct{ ttft, tpot []float64 }
	timings := map[string]*perfdb.PassTiming{}
	by := map[string]*errs{}
	var lines []string
	for _, r := range rows {
		backend, tp, c := r.Backend, r.TP, r.Concurrency
		key := fmt.Sprintf("%s/%d/%s", backend, tp, r.GemmQuant)
		pt := timings[key]
		if pt == nil {
			vs, err := perfdb.EmbeddedVersions("h200_sxm", backend)
			if err != nil || len(vs) == 0 {
				t.Fatalf("%s: %v", backend, err)
			}
			d, err := perfdb.LoadEmbedded(context.Background(), "h200_sxm", backend, vs[len(vs)-1])
			if err != nil {
				t.Fatal(err)
			}
			est, err := perfdb.NewEstimator(d, m, perfdb.Config{TP: tp, MoEEP: tp, GemmQuant: perfdb.GemmQuant(r.GemmQuant), KVQuant: perfdb.KVFP8})
			if err != nil {
				t.Fatal(err)
			}
			if pt, err = perfdb.NewPassTiming(est); err != nil {
				t.Fatal(err)
			}
			timings[key] = pt
		}
		e, err := engine.Defaults(backend, "")
		if err != nil {
			t.Fatal(err)
		}
		w := workload.Spec{ISL: r.ISL, OSL: r.OSL, Concurrency: c}
		rep, err := queueing.QuantitativeWith(context.Background(), w, e, pt, opt)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%-7s tp%d c%-4d error: %v", backend, tp, c, err))
			continue
		}
		mt, mp := r.Values[measure.TTFTMean], r.Values[measure.TPOTMean]
		qt, qp := rep.TTFTSteady.Mean(), rep.TPOT.Mean()
		et, ep := (qt-mt)/mt, (qp-mp)/mp
		if by[backend] == nil {
			by[backend] = &errs{}
		}
		by[backend].ttft = append(by[backend].ttft, et)
		by[backend].tpot = append(by[backend].tpot, ep)
		lines = append(lines, fmt.Sprintf("| %s | %d | %d | %.1f | %.1f (%.1f) | %+.0f %% | %.2f | %.2f (p99 %.2f) | %+.0f %% |",
			backend, tp, c, mt, qt, rep.TTFTSteady.Quantile(0.99), 100*et, mp, qp, rep.TPOT.Quantile(0.99), 100*ep))
	}
	var sum []string
	for _, b := range []string{"vllm", "trtllm", "sglang"} {
		x := by[b]
		if x == nil {
			continue
		}
		sum = append(sum, fmt.Sprintf("%s (%d rows): TTFT %s; TPOT %s", b, len(x.ttft), stats(x.ttft), stats(x.tpot)))
	}
	t.Logf("silicon_dev closing table, options %+v\n%s\n%s", opt, strings.Join(lines, "\n"), strings.Join(sum, "\n"))
}

// stats formats the median / min / max of relative errors (and the MAPE).
func stats(x []float64) string {
	s := slices.Clone(x)
	slices.Sort(s)
	mape := 0.0
	for _, v := range s {
		mape += math.Abs(v)
	}
	return fmt.Sprintf("median %+.0f %%, min %+.0f %%, max %+.0f %%, MAPE %.0f %%", 100*s[len(s)/2], 100*s[0], 100*s[len(s)-1], 100*mape/float64(len(s)))
}
