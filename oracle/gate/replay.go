package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/trace"
)

// ReplayFamily is one gated trace replay (W3, issue 13): the first N requests of a
// sample trace, replayed with their own arrival instants and lengths by the
// quantitative calendar (prefix hits from the reuse oracle over the engine's pool) and
// by the DES (prefix hits from the trace's hash ids in the engine's own cache).
type ReplayFamily struct {
	Name string
	// Path is the trace file (a ServeGen pool: its directory) relative to the traces
	// directory given to RunReplay.
	Path   string
	Format trace.Format
	// N is the number of requests replayed, from the start of the trace.
	N int
	// ScaleRate divides every arrival time (1 = as recorded).
	ScaleRate float64
	Engine    engine.Spec
	Timing    timing.Linear
	// KVTokens is the KV pool both sides get (the DES's pool, the reuse oracle's
	// capacity); 0 = every block of the slice at once, so no request is ever preempted
	// or evicted by pressure (the calendar has no vLLM KV model, QUEUEING.md §3).
	KVTokens int
	// KnownFailing keeps the family in the table but out of the verdict, with the reason.
	KnownFailing string
	// Refused, when set, is the error (errors.Is) the quantitative calendar must
	// refuse the family with — a regime it does not model — while the DES runs it:
	// the family passes when both hold, with no residuals.
	Refused error
	// SessionTurns, when > 0, replays W4 sessions synthesised from the slice
	// (synthSessions): consecutive requests form sessions of that many turns, a later
	// turn's prompt is the previous turn's prompt and output plus its own prompt, and
	// it arrives ThinkMs + ClientRTTMs after the previous turn's completion. The
	// model is queueing.QuantitativeSessions, the DES oracle.Sim.RunSessions.
	SessionTurns int
	ThinkMs      float64
	ClientRTTMs  float64
}

// synthSessions turns a W3 slice into W4 sessions of turns consecutive requests: a
// later turn's prompt grows by the previous turn's prompt and output (context
// growth) and drops its own hash ids (its head is the previous context; the DES
// inherits that context's blocks).
func synthSessions(reqs []trace.Request, turns int, thinkMs float64) {
	for i := range reqs {
		r := &reqs[i]
		r.Session = "g" + strconv.Itoa(i/turns)
		if i%turns == 0 {
			continue
		}
		prev := &reqs[i-1]
		r.ISL += prev.ISL + prev.OSL
		r.HashIDs = nil
		r.ThinkMs = thinkMs
	}
}

// sessionIndex numbers the slice's sessions 1, 2, … in first-turn order (0 = none).
func sessionIndex(reqs []trace.Request) []int {
	out := make([]int, len(reqs))
	ids := map[string]int{}
	for i, r := range reqs {
		if r.Session == "" {
			continue
		}
		if out[i] = ids[r.Session]; out[i] == 0 {
			out[i] = len(ids) + 1
			ids[r.Session] = out[i]
		}
	}
	return out
}

// ReplayMetrics are the gated quantities of a replay, measured identically on both
// sides from per-request records over every request of the slice.
type ReplayMetrics struct {
	TTFTP50, TTFTP99 float64
	ITLP99           float64 // every gap of every request
	TPOTMean         float64 // per request with osl > 1: (e2e − ttft)/(osl − 1)
	ThroughputRPS    float64 // requests / (last finish − first arrival), as the replay summary
	CachedTokens     int     // prefix-cache hits (reported, not gated)
}

// replayMetricNames are the gated columns, in ReplayMetrics order; replayTolerances
// are the agg families' tolerances for the same metrics.
var (
	replayMetricNames = []string{"ttft_p50", "ttft_p99", "itl_p99", "tpot_mean", "throughput"}
	replayTolerances  = []float64{tolerances[1], tolerances[2], tolerances[6], tolerances[7], tolerances[8]}
)

func (m ReplayMetrics) values() []float64 {
	return []float64{m.TTFTP50, m.TTFTP99, m.ITLP99, m.TPOTMean, m.ThroughputRPS}
}

// ReplayRow is the outcome of one replay family.
type ReplayRow struct {
	Family   ReplayFamily
	Model    ReplayMetrics
	Oracle   ReplayMetrics
	Resid    []float64
	Failures []string
	Err      error
	// Refusal is the model's refusal of a Refused family (its error text).
	Refusal string
}

// errEnough stops a trace parse once the slice is read.
var errEnough = errors.New("slice read")

// loadSlice reads the first f.N requests of the family's trace.
func loadSlice(ctx context.Context, dir string, f ReplayFamily) ([]trace.Request, error) {
	path := filepath.Join(dir, f.Path)
	var out []trace.Request
	emit := func(r trace.Request) error {
		if len(out) == f.N {
			return errEnough
		}
		if f.ScaleRate > 0 {
			r.ArrivalMs /= f.ScaleRate
		}
		out = append(out, r)
		return nil
	}
	o := trace.Options{File: f.Path, Seed: 1}
	var err error
	if f.Format == trace.ServeGen {
		err = trace.ParseServeGen(ctx, path, o, emit)
	} else {
		var fh *os.File
		if fh, err = os.Open(path); err != nil {
			return nil, err
		}
		err = trace.Parse(ctx, fh, f.Format, o, emit)
		fh.Close()
	}
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%s: %d requests: a replay needs at least 2", f.Path, len(out))
	}
	if f.SessionTurns > 0 {
		synthSessions(out, f.SessionTurns, f.ThinkMs)
	}
	return out, nil
}

// RunReplay replays one family on both sides; dir holds the sample traces.
func RunReplay(ctx context.Context, dir string, f ReplayFamily) ReplayRow {
	row := ReplayRow{Family: f}
	reqs, err := loadSlice(ctx, dir, f)
	if err != nil {
		row.Err = err
		return row
	}
	bs := max(f.Engine.BlockSize, 1)
	kv := f.KVTokens
	if kv <= 0 {
		for _, r := range reqs {
			kv += (r.ISL + r.OSL + bs) / bs * bs
		}
	}
	blocks := min(kv/bs, oracle.MaxReuseVLLMBlocks) // usable blocks (+ block 0 in the DES)
	if f.KVTokens > 0 {                             // the calendar's KV model gets the DES's pool, as trace replay does
		f.Engine.KVCapacityTokens = blocks * bs
	}
	if row.Model, err = replayModel(ctx, f, reqs, blocks); f.Refused != nil {
		return refusedReplay(ctx, row, f, reqs, blocks, err)
	} else if err != nil {
		row.Err = fmt.Errorf("model: %w", err)
		return row
	}
	if row.Oracle, err = replayOracle(ctx, f, reqs, blocks); err != nil {
		row.Err = fmt.Errorf("oracle: %w", err)
		return row
	}
	row.Resid, row.Failures = compare(row.Model.values(), row.Oracle.values(), replayTolerances, replayMetricNames)
	return row
}

// refusedReplay completes the row of a Refused family whose model replay returned
// err: the model must have refused with f.Refused, and the DES must run the family.
func refusedReplay(ctx context.Context, row ReplayRow, f ReplayFamily, reqs []trace.Request, blocks int, err error) ReplayRow {
	if !errors.Is(err, f.Refused) {
		row.Err = fmt.Errorf("model: want a refusal (%v), got %v", f.Refused, err)
		return row
	}
	row.Model, row.Refusal = ReplayMetrics{}, err.Error()
	if row.Oracle, err = replayOracle(ctx, f, reqs, blocks); err != nil {
		row.Err = fmt.Errorf("oracle: %w", err)
	}
	return row
}

// hasIDs reports whether the slice names prefix blocks.
func hasIDs(reqs []trace.Request) bool {
	for _, r := range reqs {
		if len(r.HashIDs) > 0 {
			return true
		}
	}
	return false
}

// replayModel runs the quantitative calendar; each request's cached prefix is the
// reuse oracle's hit over the same pool, as `aicdb trace replay --tier quantitative`.
func replayModel(ctx context.Context, f ReplayFamily, reqs []trace.Request, blocks int) (ReplayMetrics, error) {
	var rs *oracle.ReuseSim
	if hasIDs(reqs) {
		var err error
		rs, err = oracle.NewReuse(oracle.ReuseConfig{Backend: f.Engine.Backend, KVBlocks: blocks,
			BlockSize: f.Engine.BlockSize, HashBlock: trace.DefaultHashBlock})
		if err != nil {
			return ReplayMetrics{}, err
		}
		for _, r := range reqs {
			rs.Expect(r.HashIDs)
		}
	}
	in := make([]queueing.TraceRequest, len(reqs))
	sess := sessionIndex(reqs)
	for i, r := range reqs {
		in[i] = queueing.TraceRequest{ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, Session: sess[i], ThinkMs: r.ThinkMs}
		if rs != nil {
			in[i].Prefix = rs.Add(r.ISL, r.OSL, r.HashIDs)
			in[i].HashIDs = r.HashIDs // blocks running requests share (the DES's block identities)
		}
	}
	// the DES caches blocks when the slice names them or has sessions (replayOracle)
	o := queueing.Options{RecordTokenTimes: true, PrefixCaching: hasIDs(reqs) || f.SessionTurns > 0, HashBlock: trace.DefaultHashBlock}
	run := func() (*queueing.Report, error) {
		if f.SessionTurns > 0 {
			o.ClientRTTMs = f.ClientRTTMs
			return queueing.QuantitativeSessions(ctx, in, f.Engine, f.Timing, o, queueing.SessionOptions{})
		}
		return queueing.QuantitativeTrace(ctx, in, f.Engine, f.Timing, o)
	}
	rep, err := run()
	if err != nil {
		return ReplayMetrics{}, err
	}
	if rs != nil && rep.KVUtilPeak > oracle.KVBoundUtil { // KV-bound: hits under the KV running requests pin
		rr := make([]oracle.ReuseRequest, len(reqs))
		for i, r := range rep.Requests { // held from its prompt's KV (first token), as trace replay
			rr[i] = oracle.ReuseRequest{ArrivalMs: r.ArrivalMs + r.TTFTMs, FinishMs: r.ArrivalMs + r.E2EMs, ISL: r.ISL, OSL: r.OSL, HashIDs: reqs[i].HashIDs}
		}
		hits, err := oracle.ReusePinned(oracle.ReuseConfig{Backend: f.Engine.Backend, KVBlocks: blocks,
			BlockSize: f.Engine.BlockSize, HashBlock: trace.DefaultHashBlock}, rr)
		if err != nil {
			return ReplayMetrics{}, err
		}
		for i := range in {
			in[i].Prefix = hits[i]
		}
		if rep, err = run(); err != nil {
			return ReplayMetrics{}, err
		}
	}
	recs := make([]rec, len(rep.Requests))
	cached := 0
	for i, r := range rep.Requests {
		recs[i] = rec{slot: -1, gen: i, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.E2EMs, tokens: r.TokenMs}
		cached += r.Prefix
	}
	m, err := measureReplay(recs)
	m.CachedTokens = cached
	return m, err
}

// replayOracle runs the DES with the trace's hash ids as block identities.
func replayOracle(ctx context.Context, f ReplayFamily, reqs []trace.Request, blocks int) (ReplayMetrics, error) {
	eng, err := oracleEngine(Family{Engine: f.Engine, OracleKVTokens: blocks * max(f.Engine.BlockSize, 1)}, 1)
	if err != nil {
		return ReplayMetrics{}, err
	}
	eng.EnablePrefixCaching = hasIDs(reqs) || f.SessionTurns > 0 // a later turn hits its previous context
	s, err := oracle.New(eng, f.Timing, oracle.Options{})
	if err != nil {
		return ReplayMetrics{}, err
	}
	var turns []oracle.SessionTurn
	sess := sessionIndex(reqs)
	for i, r := range reqs {
		q := workload.Request{ArrivalMs: r.ArrivalMs, PromptLen: r.ISL, MaxTokens: r.OSL}
		var sp oracle.SharedPrefix
		if len(r.HashIDs) > 0 {
			sp = oracle.SharedPrefix{HashIDs: r.HashIDs, HashBlock: trace.DefaultHashBlock}
		}
		switch {
		case f.SessionTurns > 0:
			turns = append(turns, oracle.SessionTurn{Request: q, Prefix: sp, Session: sess[i], ThinkMs: r.ThinkMs})
		case sp.HashIDs != nil:
			_, err = s.AddShared(q, sp)
		default:
			_, err = s.Add(q)
		}
		if err != nil {
			return ReplayMetrics{}, err
		}
	}
	var res *oracle.Result
	if f.SessionTurns > 0 {
		res, err = s.RunSessions(ctx, oracle.Sessions{Turns: turns, ClientRTTMs: f.ClientRTTMs})
	} else {
		res, err = s.Run(ctx)
	}
	if err != nil {
		return ReplayMetrics{}, err
	}
	recs := make([]rec, len(res.Requests))
	cached := 0
	for i, r := range res.Requests {
		recs[i] = rec{slot: -1, gen: i, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.FinishMs - r.ArrivalMs, tokens: r.TokenTimesMs}
		cached += r.NumCachedTokens
	}
	m, err := measureReplay(recs)
	m.CachedTokens = cached
	return m, err
}

// measureReplay computes ReplayMetrics over every record, with the one quantile rule
// of queueing.Distribution.
func measureReplay(recs []rec) (ReplayMetrics, error) {
	var m ReplayMetrics
	var ttft, itl []float64
	tpot, n := 0.0, 0
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, r := range recs {
		ttft = append(ttft, r.ttft)
		for i := 1; i < len(r.tokens); i++ {
			itl = append(itl, r.tokens[i]-r.tokens[i-1])
		}
		if k := len(r.tokens); k > 1 {
			tpot += (r.e2e - r.ttft) / float64(k-1)
			n++
		}
		t0, t1 = math.Min(t0, r.arrival), math.Max(t1, r.arrival+r.e2e)
	}
	if len(ttft) == 0 || len(itl) == 0 || n == 0 || t1 <= t0 {
		return m, fmt.Errorf("%d requests, %d gaps: nothing to measure", len(ttft), len(itl))
	}
	dt, err := distOf(ttft)
	if err != nil {
		return m, err
	}
	di, err := distOf(itl)
	if err != nil {
		return m, err
	}
	m.TTFTP50, m.TTFTP99, m.ITLP99 = dt.Quantile(0.5), dt.Quantile(0.99), di.Quantile(0.99)
	m.TPOTMean = tpot / float64(n)
	m.ThroughputRPS = float64(len(recs)) / (t1 - t0) * 1000
	return m, nil
}

// distOf is the unit-weight distribution of vals.
func distOf(vals []float64) (queueing.Distribution, error) {
	atoms := make([]queueing.Atom, len(vals))
	for i, v := range vals {
		atoms[i] = queueing.Atom{Value: v, Weight: 1}
	}
	return queueing.NewDistribution(atoms)
}

// RunReplays evaluates every replay family against the traces in dir.
func RunReplays(ctx context.Context, dir string, fams []ReplayFamily) []ReplayRow {
	rows := make([]ReplayRow, 0, len(fams))
	for _, f := range fams {
		rows = append(rows, RunReplay(ctx, dir, f))
	}
	return rows
}

// ReplayVerdict returns an error listing every gated replay family that failed.
func ReplayVerdict(rows []ReplayRow) error {
	return failing("replay gate", outcomes(rows, ReplayRow.outcome))
}

func (r ReplayRow) outcome() outcome {
	return outcome{r.Family.Name, r.Family.KnownFailing, r.Err, r.Failures, r.Resid}
}

// WriteReplayTable prints the replay residuals (percent, model vs DES), the cached
// tokens of each side and the known-failing reasons.
func WriteReplayTable(w io.Writer, rows []ReplayRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "replay family\t%s\tcached model/DES\tverdict\t\n", strings.Join(replayMetricNames, "\t"))
	fmt.Fprintf(tw, "tolerance\t")
	for _, t := range replayTolerances {
		fmt.Fprintf(tw, "%.0f%%\t", t*100)
	}
	fmt.Fprintf(tw, "\t\t\n")
	for _, r := range rows {
		v := ReplayVerdictOf(r)
		if r.Err == nil && r.Refusal != "" { // the DES's cached tokens; the model refused
			fmt.Fprintf(tw, "%s\t%s-\t-/%d\t%s\t\n", r.Family.Name, strings.Repeat("-\t", len(replayMetricNames)-1), r.Oracle.CachedTokens, v)
			continue
		}
		if r.Err != nil {
			fmt.Fprintf(tw, "%s\t%s-\t-\t%s\t\n", r.Family.Name, strings.Repeat("-\t", len(replayMetricNames)-1), v)
			continue
		}
		fmt.Fprintf(tw, "%s\t", r.Family.Name)
		for _, x := range r.Resid {
			fmt.Fprintf(tw, "%s\t", pct(x))
		}
		fmt.Fprintf(tw, "%d/%d\t%s\t\n", r.Model.CachedTokens, r.Oracle.CachedTokens, v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeSummary(w, "gated replays", outcomes(rows, ReplayRow.outcome))
	for _, r := range rows {
		if r.Err == nil && r.Refusal != "" {
			fmt.Fprintf(w, "%s: model refuses (as required): %s\n", r.Family.Name, r.Refusal)
		}
	}
	return nil
}

// ReplayVerdictOf is the verdict column of a replay row.
func ReplayVerdictOf(r ReplayRow) string {
	if r.Err == nil && r.Refusal != "" {
		return "pass (model refuses)"
	}
	return r.outcome().verdict()
}
