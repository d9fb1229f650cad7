package oracle

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aicdb/aicdb/queueing"
)

// DisaggScenario is the disaggregated section of a scenario file:
//
//	{"disagg": {"prefill": {"engine": {…}, "workers": 2, "timing": {…}, "in_flight_cap": 0, "gpus_per_worker": 1},
//	            "decode": {"engine": {…}, "workers": 1, "kv_capacity_tokens": 18432},
//	            "fabric": {"inter_node_gbps": 50, "kv_bytes_per_token": 160000, …},
//	            "connector": "pull", "handoff_in_ttft": false},
//	 "timing": {…}, "requests": […]}
//
// A pool without its own timing uses the scenario's. The requests arrive at their
// arrival_ms (prompt_len, max_tokens; no prefix, prompt tokens or eos_at).
type DisaggScenario struct {
	Config DisaggConfig
}

type rawDisagg struct {
	Prefill       *rawPool   `json:"prefill"`
	Decode        *rawPool   `json:"decode"`
	Fabric        *rawFabric `json:"fabric"`
	Connector     *string    `json:"connector"`
	HandoffInTTFT *bool      `json:"handoff_in_ttft"`
}

type rawPool struct {
	Engine           *rawEngine `json:"engine"`
	Timing           *rawTiming `json:"timing"`
	Workers          *int       `json:"workers"`
	GPUsPerWorker    *int       `json:"gpus_per_worker"`
	InFlightCap      *int       `json:"in_flight_cap"`
	KVCapacityTokens *int       `json:"kv_capacity_tokens"`
}

type rawFabric struct {
	InterNodeGBps   *float64 `json:"inter_node_gbps"`
	IntraNodeGBps   *float64 `json:"intra_node_gbps"`
	Efficiency      *float64 `json:"efficiency"`
	GPUsPerNode     *int     `json:"gpus_per_node"`
	KVBytesPerToken *float64 `json:"kv_bytes_per_token"`
}

// readDisagg decodes the disagg section (unknown fields are errors).
func readDisagg(dec *json.Decoder) (*rawDisagg, error) {
	var rd *rawDisagg
	if err := dec.Decode(&rd); err != nil {
		return nil, fmt.Errorf("scenario: disagg: %w", err)
	}
	if rd == nil {
		return nil, errors.New("scenario: disagg is null; give the prefill, decode and fabric sections")
	}
	return rd, nil
}

// inPool names the pool of an engine or timing error.
func inPool(name string, err error) error {
	return fmt.Errorf("%w (in disagg.%s)", err, name)
}

// config builds the DES deployment; shared is the scenario's timing (nil: none).
func (rd *rawDisagg) config(shared *rawTiming) (DisaggConfig, error) {
	var c DisaggConfig
	pool := func(name string, rp *rawPool, dst *DisaggPool) error {
		if rp == nil {
			return fmt.Errorf("scenario: missing field disagg.%s", name)
		}
		if rp.Engine == nil {
			return fmt.Errorf("scenario: missing field disagg.%s.engine", name)
		}
		if rp.Workers == nil {
			return fmt.Errorf("scenario: missing field disagg.%s.workers", name)
		}
		if kv := rp.KVCapacityTokens; kv != nil {
			if name != "decode" {
				return fmt.Errorf("scenario: disagg.%s.kv_capacity_tokens: the prefill pool's KV is num_gpu_blocks of its engine; set kv_capacity_tokens on the decode pool", name)
			}
			if rp.Engine.NumGPUBlocks != nil {
				return errors.New("scenario: disagg.decode: give kv_capacity_tokens or engine.num_gpu_blocks, not both")
			}
			bs := 1
			if rp.Engine.BlockSize != nil && *rp.Engine.BlockSize > 0 {
				bs = *rp.Engine.BlockSize
			}
			if *kv < bs || *kv > 1<<34 {
				return fmt.Errorf("scenario: disagg.decode.kv_capacity_tokens = %d: must be in %d..%d (at least one block)", *kv, bs, 1<<34)
			}
			nb := *kv/bs + 1 // + the reserved block 0
			rp.Engine.NumGPUBlocks = &nb
		}
		e, err := rp.Engine.engine()
		if err != nil {
			return inPool(name, err)
		}
		rt := rp.Timing
		if rt == nil {
			rt = shared
		}
		if rt == nil {
			return fmt.Errorf("scenario: missing field disagg.%s.timing (or a scenario timing for both pools)", name)
		}
		tm, err := rt.timing()
		if err != nil {
			return inPool(name, err)
		}
		*dst = DisaggPool{Engine: e, Timing: tm, Workers: *rp.Workers}
		if rp.GPUsPerWorker != nil {
			dst.GPUsPerWorker = *rp.GPUsPerWorker
		}
		if rp.InFlightCap != nil {
			dst.InFlightCap = *rp.InFlightCap
		}
		return nil
	}
	if err := pool("prefill", rd.Prefill, &c.Prefill); err != nil {
		return c, err
	}
	if err := pool("decode", rd.Decode, &c.Decode); err != nil {
		return c, err
	}
	f := rd.Fabric
	if f == nil {
		return c, errors.New("scenario: missing field disagg.fabric")
	}
	if f.InterNodeGBps == nil {
		return c, errors.New("scenario: missing field disagg.fabric.inter_node_gbps")
	}
	if f.KVBytesPerToken == nil {
		return c, errors.New("scenario: missing field disagg.fabric.kv_bytes_per_token")
	}
	c.Fabric.InterNodeGBps, c.KVBytesPerToken = *f.InterNodeGBps, *f.KVBytesPerToken
	if f.IntraNodeGBps != nil {
		c.Fabric.IntraNodeGBps = *f.IntraNodeGBps
	}
	if f.Efficiency != nil {
		if *f.Efficiency == 0 {
			return c, errors.New("scenario: disagg.fabric.efficiency = 0: must be in (0, 1]; omit it for the default 0.8")
		}
		c.Fabric.Efficiency = *f.Efficiency
	}
	if f.GPUsPerNode != nil {
		c.Fabric.GPUsPerNode = *f.GPUsPerNode
	}
	if rd.Connector != nil {
		switch *rd.Connector {
		case "pull":
		case "push":
			c.Push = true
		default:
			return c, fmt.Errorf("scenario: disagg.connector = %q: must be pull or push", *rd.Connector)
		}
	}
	if rd.HandoffInTTFT != nil {
		c.HandoffInTTFT = *rd.HandoffInTTFT
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("scenario: %w", err)
	}
	return c, nil
}

// checkDisaggRequests rejects request fields the disaggregated DES does not simulate.
func checkDisaggRequests(sc *Scenario) error {
	for i, r := range sc.Requests {
		switch {
		case len(r.PromptTokens) > 0:
			return fmt.Errorf("scenario: requests[%d].prompt_tokens: disaggregated runs take prompt_len only (no prefix caching); give prompt_len", i)
		case r.EOSAt > 0:
			return fmt.Errorf("scenario: requests[%d].eos_at: disaggregated runs stop at max_tokens only; drop eos_at", i)
		case sc.Shared != nil && (sc.Shared[i].Len > 0 || sc.Shared[i].HashIDs != nil):
			return fmt.Errorf("scenario: requests[%d]: shared prefixes are not simulated in disaggregated runs; drop prefix_group/prefix_len/hash_ids", i)
		}
	}
	return nil
}

// RunDisagg simulates a disaggregated scenario: its requests in arrival order
// (ties in file order) as an open loop.
func (sc *Scenario) RunDisagg(ctx context.Context) (*DisaggResult, error) {
	if sc.Disagg == nil {
		return nil, errors.New("scenario: no disagg section")
	}
	order := make([]int, len(sc.Requests))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sc.Requests[a].ArrivalMs, sc.Requests[b].ArrivalMs) })
	ol := OpenLoop{ArrivalsMs: make([]float64, len(order))}
	for k, i := range order {
		r := sc.Requests[i]
		ol.ArrivalsMs[k] = r.ArrivalMs
		ol.ISL, ol.OSL = max(ol.ISL, r.Len()), max(ol.OSL, r.MaxTokens)
	}
	ol.Draw = func(k int) (int, int) { r := sc.Requests[order[k]]; return r.Len(), r.MaxTokens }
	d, err := NewDisagg(sc.Disagg.Config)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	res, err := d.RunOpenLoop(ctx, ol)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return res, nil
}

// DisaggSummary is `aicdb oracle run`'s summary of a disaggregated scenario: the
// aggregated summary's counters and columns (TTFT from the client-visible first
// token, ITL over the client-visible token times, TPOT = (finish − prefill first
// token)/(osl − 1)) plus the handoff columns.
type DisaggSummary struct {
	Summary
	KVTransferMsMean float64 `json:"kv_transfer_ms_mean"`
	KVTransferMsP99  float64 `json:"kv_transfer_ms_p99"`
	PQueueMsP99      float64 `json:"p_queue_ms_p99"`
	DHeadroomMin     float64 `json:"d_headroom_min"`
}

// Summary computes the run's DisaggSummary over every request.
func (res *DisaggResult) Summary() (DisaggSummary, error) {
	s := DisaggSummary{DHeadroomMin: 1}
	s.Requests, s.Passes, s.ScheduledTokens, s.Preemptions, s.EndMs = len(res.Requests), res.NumPasses, res.ScheduledToks, res.Preemptions, res.EndMs
	n := len(res.Requests)
	ttft, e2e, tpot, xfer, pq := make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	var itl valueCounts
	first, last := math.Inf(1), math.Inf(-1)
	for _, r := range res.Requests {
		first, last = min(first, r.ArrivalMs), max(last, r.FinishMs)
		s.OutputTokens += len(r.TokenTimesMs)
		ttft = append(ttft, r.VisibleMs-r.ArrivalMs)
		e2e = append(e2e, r.FinishMs-r.ArrivalMs)
		xfer = append(xfer, r.XferEndMs-r.XferStartMs)
		pq = append(pq, r.PrefillStartMs-r.ArrivalMs)
		s.DHeadroomMin = min(s.DHeadroomMin, r.Headroom)
		for j := 1; j < len(r.TokenTimesMs); j++ {
			itl.add(r.TokenTimesMs[j]-r.TokenTimesMs[j-1], 1)
		}
		if r.OSL > 1 {
			tpot = append(tpot, (r.FinishMs-r.FirstTokenMs)/float64(r.OSL-1))
		}
	}
	var err error
	dist := func(v []float64) queueing.Distribution {
		if len(v) == 0 {
			return queueing.PointMass(0)
		}
		d, e := distOf(v)
		if e != nil && err == nil {
			err = e
		}
		return d
	}
	dt, de, dp, dx := dist(ttft), dist(e2e), dist(tpot), dist(xfer)
	di := queueing.PointMass(0)
	if itl.n > 0 {
		if di, err = itl.dist(); err != nil {
			return s, fmt.Errorf("oracle summary: %w", err)
		}
	}
	s.TTFTMean, s.TTFTP50, s.TTFTP90, s.TTFTP99, s.TTFTP999 = dt.Mean(), dt.Quantile(0.5), dt.Quantile(0.9), dt.Quantile(0.99), dt.Quantile(0.999)
	s.ITLMean, s.ITLP50, s.ITLP99 = di.Mean(), di.Quantile(0.5), di.Quantile(0.99)
	s.TPOTMean, s.TPOTP50, s.TPOTP99 = dp.Mean(), dp.Quantile(0.5), dp.Quantile(0.99)
	s.E2EMean, s.E2EP50, s.E2EP99 = de.Mean(), de.Quantile(0.5), de.Quantile(0.99)
	s.KVTransferMsMean, s.KVTransferMsP99, s.PQueueMsP99 = dx.Mean(), dx.Quantile(0.99), dist(pq).Quantile(0.99)
	if last > first {
		s.ThroughputRPS = float64(n) / (last - first) * 1000
		s.OutputTokensPerS = float64(s.OutputTokens) / (last - first) * 1000
	}
	if err != nil {
		return s, fmt.Errorf("oracle summary: %w", err)
	}
	return s, nil
}

// disaggScenario finishes a scenario with a disagg section.
func disaggScenario(sc *Scenario, rd *rawDisagg, eng *rawEngine, tim *rawTiming, anyShared bool) (*Scenario, error) {
	if eng != nil {
		return nil, errors.New("scenario: engine is given with disagg; give each pool its engine (disagg.prefill.engine, disagg.decode.engine)")
	}
	if len(sc.Requests) == 0 {
		return nil, errors.New("scenario: requests is empty; give at least one request")
	}
	if !anyShared {
		sc.Shared = nil
	}
	if err := checkDisaggRequests(sc); err != nil {
		return nil, err
	}
	c, err := rd.config(tim)
	if err != nil {
		return nil, err
	}
	sc.Disagg = &DisaggScenario{Config: c}
	return sc, nil
}
