package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/disagg"
	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// replayHandoff are the handoff columns of a disaggregated replay's summary (as
// oracle.DisaggSummary and disagg.Report.Columns name them).
type replayHandoff struct {
	KVTransferMsMean float64 `json:"kv_transfer_ms_mean"`
	KVTransferMsP99  float64 `json:"kv_transfer_ms_p99"`
	PQueueMsP99      float64 `json:"p_queue_ms_p99"`
	DHeadroomMin     float64 `json:"d_headroom_min"`
}

// replayDisagg replays the slice through a prefill/decode deployment (--mode
// disagg): both pools run the --engine file's engine and timing (or the perf-data
// timing at --tp), with the pool, connector and fabric flags of eval --mode disagg.
// --tier quantitative runs the tandem (disagg.QuantitativeTrace/Sessions), --tier
// oracle the disaggregated DES (oracle.DisaggSim.RunTrace/RunSessions). The decode
// KV is --decode-kv-capacity-tokens, else the engine file's pool. Prefix caching is
// not simulated in disaggregated runs: the trace's hash ids are not read and a W4
// later turn recomputes its context.
func replayDisagg(c *cli.Context, st *store.Store, info store.TraceInfo, sl store.TraceSlice, eng engine.Spec, tim timing.Timing, tier string, bar *progressReporter) (oracle.Summary, *replayHandoff, []store.ReplayRow, error) {
	var sum oracle.Summary
	fail := func(err error) (oracle.Summary, *replayHandoff, []store.ReplayRow, error) { return sum, nil, nil, err }
	for _, f := range []string{"max-sessions", "prefill-tp", "decode-tp"} {
		if c.IsSet(f) {
			return fail(userErrorf("trace replay --mode disagg: --%s: not read (both pools take the --engine timing, or --model at --tp; no session cap); drop it", f))
		}
	}
	if eng.EnablePrefixCaching {
		return fail(userErrorf("trace replay --mode disagg: --engine: enable_prefix_caching: prefix caching is not simulated in disaggregated runs; set it to false"))
	}
	cfg, err := disaggPoolFlags(c)
	if err != nil {
		return fail(err)
	}
	for _, f := range []string{"kv-bytes-per-token", "inter-node-gbps"} {
		if !c.IsSet(f) {
			return fail(userErrorf("trace replay --mode disagg: --%s is required", f))
		}
	}
	spec, err := eng, eng.Validate() // the model reads the oracle engine as is; its KV pool is the calendar's KV capacity
	if err != nil {
		return fail(userErrorf("trace replay --mode disagg: --engine: %v", err))
	}
	if !c.IsSet("decode-kv-capacity-tokens") {
		cfg.Decode.KVCapacityTokens = spec.KVCapacityTokens
	}
	spec.KVCapacityTokens = 0 // the tandem's decode KV is the pool's; its prefill KV is not modelled
	gpw := max(c.Int("tp"), 1)
	cfg.Prefill.Engine, cfg.Decode.Engine = spec, spec
	cfg.Prefill.Timing, cfg.Decode.Timing = tim, tim
	cfg.Prefill.GPUsPerWorker, cfg.Decode.GPUsPerWorker = gpw, gpw
	tw, err := refine.LoadTraceWorkload(c.Context, st, info, sl)
	if err != nil {
		if err == refine.ErrEmptySlice {
			return fail(userErrorf("trace replay %s: the slice holds no requests", info.Name))
		}
		return fail(err)
	}
	sessions := c.Bool("sessions")
	rtt := c.Float64("client-rtt-ms")
	rows := make([]store.ReplayRow, len(tw.Reqs))
	var hand replayHandoff
	if tier == "oracle" {
		res, err := replayDisaggDES(c, cfg, eng, tw.Reqs, sessions, rtt, bar)
		if err != nil {
			return fail(userErrorf("trace replay %s: %v", info.Name, err))
		}
		ds, err := res.Summary()
		if err != nil {
			return fail(err)
		}
		sum, hand = ds.Summary, replayHandoff{ds.KVTransferMsMean, ds.KVTransferMsP99, ds.PQueueMsP99, ds.DHeadroomMin}
		for i, r := range res.Requests {
			rows[i] = store.ReplayRow{Seq: tw.Seqs[i], ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, TTFTMs: r.VisibleMs - r.ArrivalMs,
				TPOTMs: tpotOf(r.FinishMs-r.FirstTokenMs, r.OSL), E2EMs: r.FinishMs - r.ArrivalMs}
		}
		return sum, &hand, rows, nil
	}
	// The DES's prefill engines run the file's pool; the tandem checks its holds
	// against it (disagg.PrefillHoldsError).
	cfg.Prefill.KVCapacityTokens = eng.KVCapacityTokens
	var rep *disagg.TraceReport
	if sessions {
		rep, err = disagg.QuantitativeSessions(c.Context, tw.Reqs, cfg, disagg.Options{Progress: bar.Update}, disagg.SessionOptions{ClientRTTMs: rtt})
	} else {
		rep, err = disagg.QuantitativeTrace(c.Context, tw.Reqs, cfg, disagg.Options{Progress: bar.Update})
	}
	var held *disagg.PrefillHoldsError
	if errors.As(err, &held) {
		return fail(userErrorf("trace replay %s --mode disagg --tier quantitative: %v; use --tier oracle, or a decode KV that takes them sooner", info.Name, held))
	}
	if err != nil {
		if queueing.IsInputError(err) {
			return fail(userErrorf("trace replay %s: %v", info.Name, err))
		}
		return fail(err)
	}
	sum = oracle.Summary{Requests: len(rep.Records), Passes: rep.Diagnostics.Passes, EndMs: rep.Diagnostics.WindowEndMs,
		TTFTMean: rep.TTFTSteady.Mean(), TTFTP50: rep.TTFTSteady.Quantile(0.5), TTFTP90: rep.TTFTSteady.Quantile(0.9),
		TTFTP99: rep.TTFTSteady.Quantile(0.99), TTFTP999: rep.TTFTSteady.Quantile(0.999),
		ITLMean: rep.ITL.Mean(), ITLP50: rep.ITL.Quantile(0.5), ITLP99: rep.ITL.Quantile(0.99),
		E2EMean: rep.E2E.Mean(), E2EP50: rep.E2E.Quantile(0.5), E2EP99: rep.E2E.Quantile(0.99),
		ThroughputRPS: rep.ThroughputRPS, OutputTokensPerS: rep.OutputTokensPerS,
		Preemptions: replayPreemptions(rep.PreemptionsPerRequest, len(rep.Records))}
	hand = replayHandoff{rep.KVTransfer.Mean(), rep.KVTransfer.Quantile(0.99), rep.PQueueMsP99, rep.DHeadroomMin}
	var tpot []queueing.Atom // over the requests with osl > 1, as oracle.DisaggSummary
	for i, r := range rep.Records {
		sum.OutputTokens += r.OSL
		sum.ScheduledTokens += r.ISL + r.OSL - 1
		rows[i] = store.ReplayRow{Seq: tw.Seqs[i], ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, TTFTMs: r.TTFTMs,
			TPOTMs: tpotOf(r.E2EMs-r.TTFTMs, r.OSL), E2EMs: r.E2EMs}
		if r.OSL > 1 {
			tpot = append(tpot, queueing.Atom{Value: rows[i].TPOTMs, Weight: 1})
		}
	}
	if len(tpot) > 0 {
		d, err := queueing.NewDistribution(tpot)
		if err != nil {
			return fail(err)
		}
		sum.TPOTMean, sum.TPOTP50, sum.TPOTP99 = d.Mean(), d.Quantile(0.5), d.Quantile(0.99)
	}
	return sum, &hand, rows, nil
}

// tpotOf is a request's time per output token after the first: span/(osl − 1), 0
// for a one-token request.
func tpotOf(span float64, osl int) float64 {
	if osl <= 1 {
		return 0
	}
	return span / float64(osl-1)
}

// replayDisaggDES runs the disaggregated DES: both pools the engine file's engine
// (its running cap lowered to the pool's batch cap), the decode pool's KV
// --decode-kv-capacity-tokens when given.
func replayDisaggDES(c *cli.Context, cfg disagg.Config, eng engine.Spec, reqs []queueing.TraceRequest, sessions bool, rtt float64, bar *progressReporter) (*oracle.DisaggResult, error) {
	pool := func(p disagg.Pool) oracle.DisaggPool {
		e := eng
		if b := p.BatchCap; b > 0 {
			e.MaxNumSeqs, e.MaxBatchSize = min(e.MaxNumSeqs, b), min(e.MaxBatchSize, b)
		}
		return oracle.DisaggPool{Engine: e, Timing: p.Timing, Workers: p.Workers, GPUsPerWorker: p.GPUsPerWorker, InFlightCap: p.InFlightCap}
	}
	dc := oracle.DisaggConfig{Prefill: pool(cfg.Prefill), Decode: pool(cfg.Decode), KVBytesPerToken: cfg.KVBytesPerToken, Push: cfg.Push,
		HandoffInTTFT: cfg.HandoffInTTFT, Fabric: oracle.DisaggFabric{InterNodeGBps: cfg.Fabric.InterNodeGBps,
			IntraNodeGBps: cfg.Fabric.IntraNodeGBps, Efficiency: cfg.Fabric.Efficiency, GPUsPerNode: cfg.Fabric.GPUsPerNode},
		Progress: bar.Update}
	if c.IsSet("decode-kv-capacity-tokens") {
		bs := max(eng.BlockSize, 1)
		dc.Decode.Engine.SetGPUBlocks(cfg.Decode.KVCapacityTokens/bs + 1) // + the reserved block 0
	}
	d, err := oracle.NewDisagg(dc)
	if err != nil {
		return nil, err
	}
	turns := make([]oracle.DisaggTurn, len(reqs))
	for i, r := range reqs {
		turns[i] = oracle.DisaggTurn{ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, Session: r.Session, ThinkMs: r.ThinkMs}
	}
	if sessions {
		return d.RunSessions(c.Context, oracle.DisaggSessions{Turns: turns, ClientRTTMs: rtt})
	}
	return d.RunTrace(c.Context, turns)
}
