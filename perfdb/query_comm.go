package perfdb

// query_comm.go answers the communication collectives (Rust
// perf_database/communication.rs + operators/communication.rs): 1-D curves
// over the message size (elements) with the bandwidth-ratio scaling beyond
// the collected fan-out.

import (
	"fmt"
	"math"
	"strings"
)

// ncclCurveKey selects an NCCL curve.
type ncclCurveKey struct {
	dtype, op string
	gpus      int
}

// buildComm indexes custom all-reduce (every row under "half", `*_eager`
// kernels dropped) and NCCL curves; the first row at a size wins.
func (t *tables) buildComm(d *Data) {
	ar := map[int][]curvePoint{}
	for _, r := range d.AllReduce {
		if strings.HasSuffix(r.Kernel, "_eager") && !strings.Contains(t.sys.DataDir, "b60") {
			continue
		}
		ar[r.NumGPUs] = append(ar[r.NumGPUs], curvePoint{x: float64(r.MessageSize), l: newLeaf(r.Latency, r.Power)})
	}
	t.allreduce, t.arMono = map[int]*curve{}, map[int]*curve{}
	for g, pts := range ar {
		t.allreduce[g] = newCurve("message_bytes", pts)
		t.arMono[g] = monotoneCurve(t.allreduce[g])
	}
	nc := map[ncclCurveKey][]curvePoint{}
	t.ncclMax = map[[2]string]int{}
	for _, r := range d.NCCL {
		k := ncclCurveKey{r.Dtype, r.Op, r.NumGPUs}
		nc[k] = append(nc[k], curvePoint{x: float64(r.MessageSize), l: newLeaf(r.Latency, r.Power)})
		mk := [2]string{r.Dtype, r.Op}
		t.ncclMax[mk] = max(t.ncclMax[mk], r.NumGPUs)
	}
	t.nccl = map[ncclCurveKey]*curve{}
	for k, pts := range nc {
		t.nccl[k] = newCurve("message_bytes", pts)
	}
}

// CustomAllReduce is the framework all-reduce latency of size ELEMENTS
// across tp GPUs (Rust query_custom_allreduce_table). tp ≤ 1 is 0 (source
// Empirical). SILICON reads the curve at min(tp, gpus_per_node) and scales
// by (tp−1)/tp·N/(N−1)·bw(N)/bw(tp) beyond the node; on 72-GPU NVLink
// domains tp > 4 is answered by NCCL all_reduce.
func (q *Querier) CustomAllReduce(quant CommQuant, tp int, size float64) (Perf, error) {
	if tp <= 1 {
		return Perf{Source: SourceEmpirical}, nil
	}
	if !(size >= 0) || math.IsInf(size, 0) {
		return Perf{}, fmt.Errorf("custom all-reduce: size = %v elements must be a finite number ≥ 0", size)
	}
	if _, err := quant.Mapping(); err != nil {
		return Perf{}, err
	}
	if q.sys.NumGPUsPerNode == 72 && tp > 4 && q.silicon() {
		return q.NCCL(quant, tp, NCCLAllReduce, size)
	}
	switch q.mode {
	case ModeSOL:
		return Perf{LatencyMs: customAllReduceSOL(q.sys, tp, size), Source: SourceSOL}, nil
	case ModeEmpirical:
		v, err := q.allReduceEmpirical(quant, tp, size)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	l, err := q.allReduceSilicon(quant, tp, size)
	if err == nil {
		return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}, nil
	}
	if q.hybridMiss(err) {
		v, err := q.allReduceEmpirical(quant, tp, size)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	return Perf{}, err
}

// silicon reports whether the mode reads the tables first.
func (q *Querier) silicon() bool { return q.mode == ModeSilicon || q.mode == ModeHybrid }

// allReduceSilicon is query_custom_allreduce_scaled.
func (q *Querier) allReduceSilicon(quant CommQuant, tp int, size float64) (leaf, error) {
	per := q.sys.NumGPUsPerNode
	eff := min(tp, per)
	if eff <= 1 {
		return leaf{}, nil
	}
	curves := q.allreduce
	if q.monotone {
		curves = q.arMono
	}
	cv, ok := curves[eff]
	if !ok || quant != CommHalf {
		return leaf{}, missf("custom all-reduce data missing for (%s, %d GPUs) (%s %s %s)", quant, eff, q.sys.Name, q.backend, q.version)
	}
	l, err := cv.query(identitySOL{}, size)
	if err != nil {
		return leaf{}, err
	}
	if tp > per {
		ft, fp := float64(tp), float64(per)
		s := (ft - 1) / ft * fp / math.Max(fp-1, 1) * p2pBandwidth(q.sys, per) / p2pBandwidth(q.sys, tp)
		l.lat *= s
		l.energy *= s
	}
	return l, nil
}

// allReduceEmpirical is custom_allreduce_empirical: util over the node-capped
// tp slice, SOL at the real tp.
func (q *Querier) allReduceEmpirical(quant CommQuant, tp int, size float64) (float64, error) {
	solQ := customAllReduceSOL(q.sys, tp, size)
	if tp <= 1 || solQ <= 0 {
		return solQ, nil
	}
	eff := min(tp, q.sys.NumGPUsPerNode)
	g := q.emp.grid(fmt.Sprintf("custom_allreduce:%s:%d", quant, eff), func() *utilGrid {
		cv, ok := q.allreduce[eff]
		if !ok || quant != CommHalf {
			return nil
		}
		return buildUtilGrid(1, curvePoints(cv), &commCurveSOL{sys: q.sys, tp: eff})
	})
	return g.estimate(solQ, pt{size}, 1)
}

// curvePoints lists a curve's (size, latency) points in order.
func curvePoints(cv *curve) []gridPointF {
	out := make([]gridPointF, len(cv.pts))
	for i, p := range cv.pts {
		out[i] = gridPointF{c: pt{p.x}, lat: p.l.lat}
	}
	return out
}

// NCCL is the NCCL collective latency (op one of NCCLAllGather,
// NCCLAllReduce, NCCLAllToAll, NCCLReduceScatter) of size ELEMENTS across
// numGPUs GPUs (Rust query_nccl_table): the curve at min(numGPUs,
// max collected) with the bandwidth-ratio scaling beyond it. numGPUs ≤ 1 is 0.
func (q *Querier) NCCL(quant CommQuant, numGPUs int, op string, size float64) (Perf, error) {
	if numGPUs <= 1 {
		if q.mode == ModeSOL {
			return Perf{Source: SourceSOL}, nil
		}
		return Perf{Source: SourceEmpirical}, nil
	}
	if !(size >= 0) || math.IsInf(size, 0) {
		return Perf{}, fmt.Errorf("nccl %s: size = %v elements must be a finite number ≥ 0", op, size)
	}
	mp, err := quant.Mapping()
	if err != nil {
		return Perf{}, err
	}
	switch q.mode {
	case ModeSOL:
		return Perf{LatencyMs: ncclSOL(q.sys, mp.Memory, numGPUs, op, size), Source: SourceSOL}, nil
	case ModeEmpirical:
		v, err := q.ncclEmpirical(quant, mp.Memory, numGPUs, op, size)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	l, err := q.ncclSilicon(quant, numGPUs, op, size)
	if err == nil {
		return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}, nil
	}
	if q.hybridMiss(err) {
		v, err := q.ncclEmpirical(quant, mp.Memory, numGPUs, op, size)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	return Perf{}, err
}

// ncclSilicon is query_nccl_scaled.
func (q *Querier) ncclSilicon(quant CommQuant, n int, op string, size float64) (leaf, error) {
	maxRec, ok := q.ncclMax[[2]string{string(quant), op}]
	if !ok {
		maxRec = n
	}
	eff := min(n, maxRec)
	if eff <= 1 {
		return leaf{}, nil
	}
	cv, ok := q.nccl[ncclCurveKey{string(quant), op, eff}]
	if !ok {
		return leaf{}, missf("NCCL data missing for (%s, %s, %d GPUs) on %s", quant, op, eff, q.sys.Name)
	}
	l, err := cv.query(identitySOL{}, size)
	if err != nil {
		return leaf{}, err
	}
	if n > maxRec {
		fn, fm := float64(n), float64(maxRec)
		s := (fn - 1) / fn * fm / math.Max(fm-1, 1) * p2pBandwidth(q.sys, maxRec) / p2pBandwidth(q.sys, n)
		l.lat *= s
		l.energy *= s
	}
	return l, nil
}

// ncclEmpirical is nccl_empirical: util over the capped slice, SOL at the
// real GPU count.
func (q *Querier) ncclEmpirical(quant CommQuant, mem float64, n int, op string, size float64) (float64, error) {
	solQ := ncclSOL(q.sys, mem, n, op, size)
	if n <= 1 || solQ <= 0 {
		return solQ, nil
	}
	maxRec, ok := q.ncclMax[[2]string{string(quant), op}]
	if !ok {
		return 0, &EmpiricalMissError{Msg: fmt.Sprintf("no NCCL data for operation %q (%s, num_gpus=%d)", op, quant, n)}
	}
	eff := min(n, maxRec)
	g := q.emp.grid(fmt.Sprintf("nccl:%s:%s:%d", quant, op, eff), func() *utilGrid {
		cv, ok := q.nccl[ncclCurveKey{string(quant), op, eff}]
		if !ok {
			return nil
		}
		return buildUtilGrid(1, curvePoints(cv), &commCurveSOL{sys: q.sys, tp: eff, mem: mem, op: op, nccl: true})
	})
	return g.estimate(solQ, pt{size}, 1)
}
