package gate

import (
	"context"
	"fmt"
	"strings"

	"github.com/aicdb/aicdb/disagg"
	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/trace"
)

// ReplayDisaggN is the slice length of the disaggregated replay families.
const ReplayDisaggN = 500

// ReplayDisaggFamily is one gated disaggregated trace replay (issue 13): a slice of
// a sample trace (ReplayFamily's Path, Format, N, ScaleRate and W4 session knobs)
// replayed through the tandem (disagg.QuantitativeTrace / QuantitativeSessions) and
// the disaggregated DES (oracle.DisaggSim.RunTrace / RunSessions). Hash ids are
// dropped: prefix caching is not simulated in disaggregated runs.
type ReplayDisaggFamily struct {
	ReplayFamily
	Config disagg.Config
}

// ReplayDisaggFamilies are the gated disaggregated replays: the first 500 requests
// of the Azure conversation trace at 4× its rate on a vLLM 1P1D and a 2P1D tandem
// (replay timing, 25 GB/s NICs), W3 and W4 4-turn sessions (2 s think time), and
// W3 on SGLang and TRT-LLM 1P1D with their default engines.
func ReplayDisaggFamilies() []ReplayDisaggFamily {
	e := vllm(8192, 256)
	const azure = "azure_llm_2023/AzureLLMInferenceTrace_conv.csv"
	mk := func(name string, nP, nD int, turns int) ReplayDisaggFamily {
		c := tandemConfig(nP, nD, e, 25)
		if eng, ok := backendOf(name); ok {
			c.Prefill.Engine, c.Decode.Engine = eng, eng
		}
		c.Prefill.Timing, c.Decode.Timing = replayTiming, replayTiming
		f := ReplayDisaggFamily{ReplayFamily: ReplayFamily{Name: name, Path: azure, Format: trace.Azure, N: ReplayDisaggN, ScaleRate: 4,
			Engine: e, Timing: replayTiming}, Config: c}
		if turns > 0 {
			f.SessionTurns, f.ThinkMs, f.ClientRTTMs = turns, 2000, queueing.DefaultClientRTTMs
		}
		return f
	}
	return []ReplayDisaggFamily{
		mk("disagg 1P1D vllm/azure conversation 500 rate×4", 1, 1, 0),
		mk("disagg 2P1D vllm/azure conversation 500 rate×4", 2, 1, 0),
		mk("disagg 1P1D vllm/azure conversation 500 rate×4 W4 4-turn sessions", 1, 1, 4),
		mk("disagg 1P1D sglang/azure conversation 500 rate×4 defaults", 1, 1, 0),
		mk("disagg 1P1D trtllm/azure conversation 500 rate×4 defaults", 1, 1, 0),
		mtp(mk("disagg 1P1D trtllm/azure conversation 500 rate×4 MTP k1 a0.85", 1, 1, 0), 1, 0.85),
		mtp(mk("disagg 1P1D sglang/azure conversation 500 rate×4 EAGLE k2 a1.2", 1, 1, 0), 2, 1.2),
	}
}

// mtp is f with k MTP drafts per decode step, a accepted, on both pools (the
// trace's output lengths vary, so a request's last step is often capped).
func mtp(f ReplayDisaggFamily, k int, a float64) ReplayDisaggFamily {
	f.Config.Prefill.Engine = drafted(f.Config.Prefill.Engine, k, a)
	f.Config.Decode.Engine = drafted(f.Config.Decode.Engine, k, a)
	return f
}

// backendOf returns the default engine a family name selects (sglang, trtllm).
func backendOf(name string) (engine.Spec, bool) {
	switch {
	case strings.Contains(name, " sglang/"):
		return sglEngine(), true
	case strings.Contains(name, " trtllm/"):
		return trtEngine(), true
	}
	return engine.Spec{}, false
}

// RunReplayDisagg replays one disaggregated family on both sides; dir holds the
// sample traces. The row's metrics are those of ReplayRow, measured identically
// from per-request records.
func RunReplayDisagg(ctx context.Context, dir string, f ReplayDisaggFamily) ReplayRow {
	row := ReplayRow{Family: f.ReplayFamily}
	reqs, err := loadSlice(ctx, dir, f.ReplayFamily)
	if err != nil {
		row.Err = err
		return row
	}
	if row.Model, err = replayDisaggModel(ctx, f, reqs); err != nil {
		row.Err = fmt.Errorf("model: %w", err)
		return row
	}
	if row.Oracle, err = replayDisaggOracle(ctx, f, reqs); err != nil {
		row.Err = fmt.Errorf("oracle: %w", err)
		return row
	}
	row.Resid, row.Failures = compare(row.Model.values(), row.Oracle.values(), replayTolerances, replayMetricNames)
	return row
}

// replayDisaggModel runs the tandem and measures its records as measureReplay does
// (the ITL p99 from the tandem's ITL distribution: it pools gaps, not token times).
func replayDisaggModel(ctx context.Context, f ReplayDisaggFamily, reqs []trace.Request) (ReplayMetrics, error) {
	in := make([]queueing.TraceRequest, len(reqs))
	sess := sessionIndex(reqs)
	for i, r := range reqs {
		in[i] = queueing.TraceRequest{ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, Session: sess[i], ThinkMs: r.ThinkMs}
	}
	var rep *disagg.TraceReport
	var err error
	if f.SessionTurns > 0 {
		rep, err = disagg.QuantitativeSessions(ctx, in, f.Config, disagg.Options{}, disagg.SessionOptions{ClientRTTMs: f.ClientRTTMs})
	} else {
		rep, err = disagg.QuantitativeTrace(ctx, in, f.Config, disagg.Options{})
	}
	if err != nil {
		return ReplayMetrics{}, err
	}
	var m ReplayMetrics
	ttft := make([]float64, len(rep.Records))
	tpot, n := 0.0, 0
	for i, r := range rep.Records {
		ttft[i] = r.TTFTMs
		if r.OSL > 1 {
			tpot += (r.E2EMs - r.TTFTMs) / float64(r.OSL-1)
			n++
		}
	}
	dt, err := distOf(ttft)
	if err != nil || n == 0 {
		return m, fmt.Errorf("tandem replay: %d requests with osl > 1: nothing to measure (%v)", n, err)
	}
	m.TTFTP50, m.TTFTP99, m.ITLP99 = dt.Quantile(0.5), dt.Quantile(0.99), rep.ITL.Quantile(0.99)
	m.TPOTMean, m.ThroughputRPS = tpot/float64(n), rep.ThroughputRPS
	return m, nil
}

// replayDisaggOracle runs the disaggregated DES over the same slice.
func replayDisaggOracle(ctx context.Context, f ReplayDisaggFamily, reqs []trace.Request) (ReplayMetrics, error) {
	isl, osl := 1, 1 // the engines' KV is sized for 256 of the slice's longest requests (never binds)
	for _, r := range reqs {
		isl, osl = max(isl, r.ISL), max(osl, r.OSL)
	}
	cfg, err := DisaggConfig(closed(isl, osl, 0, 1), f.Config)
	if err != nil {
		return ReplayMetrics{}, err
	}
	d, err := oracle.NewDisagg(cfg)
	if err != nil {
		return ReplayMetrics{}, err
	}
	turns := make([]oracle.DisaggTurn, len(reqs))
	sess := sessionIndex(reqs)
	for i, r := range reqs {
		turns[i] = oracle.DisaggTurn{ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, Session: sess[i], ThinkMs: r.ThinkMs}
	}
	var res *oracle.DisaggResult
	if f.SessionTurns > 0 {
		res, err = d.RunSessions(ctx, oracle.DisaggSessions{Turns: turns, ClientRTTMs: f.ClientRTTMs})
	} else {
		res, err = d.RunTrace(ctx, turns)
	}
	if err != nil {
		return ReplayMetrics{}, err
	}
	recs := make([]rec, len(res.Requests))
	for i, r := range res.Requests {
		recs[i] = rec{slot: -1, gen: i, arrival: r.ArrivalMs, ttft: r.VisibleMs - r.ArrivalMs, e2e: r.FinishMs - r.ArrivalMs, tokens: r.TokenTimesMs}
		if len(r.TokenTimesMs) == 0 {
			recs[i].tokens = []float64{r.VisibleMs}
		}
	}
	return measureReplay(recs)
}

// RunReplayDisaggs evaluates every disaggregated replay family.
func RunReplayDisaggs(ctx context.Context, dir string, fams []ReplayDisaggFamily) []ReplayRow {
	rows := make([]ReplayRow, 0, len(fams))
	for _, f := range fams {
		rows = append(rows, RunReplayDisagg(ctx, dir, f))
	}
	return rows
}
