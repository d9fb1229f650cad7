package refine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/store/measure"
)

// TestProfileVsSiliconDev reports, for the 44 measured rows of
// ../shared/data/measurements-dev/silicon_dev.csv (Llama-3.1-70B fp8 on h200,
// closed loop at C = batch_size, isl = osl = 1024), the quantitative tier's
// steady TTFT mean and TPOT mean under --engine-profile defaults and
// aiconfigurator, with the relative error to the measurement per backend. Timing
// as in docs/queueing.md §7: perfdb.PassTiming over the newest embedded version
// of each backend, the row's gemm quant, KV fp8. Report only (t.Log), nothing
// fitted. AICDB_PROFILE_REPORT=1 runs it; AICDB_PROFILE_STAGGER=N sets the
// stagger phases (default 0, the burst).
func TestProfileVsSiliconDev(t *testing.T) {
	if os.Getenv("AICDB_PROFILE_REPORT") == "" {
		t.Skip("set AICDB_PROFILE_REPORT=1 to print the profile-vs-measured table")
	}
	stagger, _ := strconv.Atoi(os.Getenv("AICDB_PROFILE_STAGGER"))
	rows, err := measure.ParseFile(filepath.Join("..", "..", "shared", "data", "measurements-dev", "silicon_dev.csv"), measure.FormatAICSilicon, measure.Deployment{})
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
	ctx := context.Background()
	profiles := []string{queueing.ProfileDefaults, queueing.ProfileAIConfigurator}
	type errs struct{ ttft, tpot []float64 }
	acc := map[string]*errs{}
	lines := []string{"backend tp   C | measured TTFT  TPOT | defaults TTFT (err)  TPOT (err) | aiconfigurator TTFT (err)  TPOT (err)"}
	for _, r := range rows {
		backend, tp, c, isl, osl := r.Backend, r.TP, r.Concurrency, r.ISL, r.OSL
		mt, mp := r.Values[measure.TTFTMean], r.Values[measure.TPOTMean]
		vs, err := perfdb.EmbeddedVersions("h200_sxm", backend)
		if err != nil || len(vs) == 0 {
			t.Fatalf("%s: %v", backend, err)
		}
		slices.SortFunc(vs, perfdb.CompareVersions)
		version := vs[len(vs)-1]
		d, err := perfdb.LoadEmbedded(ctx, "h200_sxm", backend, version)
		if err != nil {
			t.Fatal(err)
		}
		est, err := perfdb.NewEstimator(d, m, perfdb.Config{Backend: backend, Version: version, TP: tp, PP: 1, DP: 1, MoETP: 1, MoEEP: 1,
			GemmQuant: perfdb.GemmQuant(r.GemmQuant), KVQuant: perfdb.KVFP8})
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%-7s %d %4d | %8.1f %6.2f", backend, tp, c, mt, mp)
		for _, p := range profiles {
			e, err := queueing.ProfileEngine(p, queueing.ProfileInput{Backend: backend, Version: version, Role: queueing.RoleAgg, Batch: c, ISL: isl, OSL: osl})
			if err != nil {
				t.Fatal(err)
			}
			pt, err := perfdb.NewPassTiming(est)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := queueing.QuantitativeWith(ctx, workload.Spec{ISL: isl, OSL: osl, Concurrency: c}, e, pt, queueing.Options{StaggerPhases: stagger})
			if err != nil {
				line += fmt.Sprintf(" | error: %v", err)
				continue
			}
			et, ep := (rep.TTFTSteady.Mean()-mt)/mt, (rep.TPOT.Mean()-mp)/mp
			k := p + "/" + backend
			if acc[k] == nil {
				acc[k] = &errs{}
			}
			acc[k].ttft = append(acc[k].ttft, et)
			acc[k].tpot = append(acc[k].tpot, ep)
			line += fmt.Sprintf(" | %8.1f (%+5.0f%%) %6.2f (%+4.0f%%)", rep.TTFTSteady.Mean(), 100*et, rep.TPOT.Mean(), 100*ep)
		}
		lines = append(lines, line)
	}
	summary := []string{fmt.Sprintf("stagger phases %d", stagger)}
	for _, p := range profiles {
		for _, b := range []string{"vllm", "trtllm"} {
			a := acc[p+"/"+b]
			if a == nil {
				continue
			}
			summary = append(summary, fmt.Sprintf("%-14s %-6s n=%d  TTFT MAPE %5.1f%% median %+5.1f%%  TPOT MAPE %5.1f%% median %+5.1f%%",
				p, b, len(a.ttft), 100*mape(a.ttft), 100*median(a.ttft), 100*mape(a.tpot), 100*median(a.tpot)))
		}
	}
	t.Logf("quantitative tier vs silicon_dev:\n%s\n%s", strings.Join(lines, "\n"), strings.Join(summary, "\n"))
}

func mape(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += math.Abs(v)
	}
	return s / float64(len(x))
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	n := len(y)
	if n%2 == 1 {
		return y[n/2]
	}
	return (y[n/2-1] + y[n/2]) / 2
}
