package perfdb

// query_gdn.go answers the Gated-DeltaNet kernels of Qwen3.5's linear
// attention layers (Rust perf_database/state_space.rs query_gdn and
// operators/mamba.rs GdnOp): context kernels on a (batch, seq_len) grid,
// decode kernels on a batch curve, both raw blends with the kernel's
// memory roofline as util carrier. A shape the table lacks is priced at
// that roofline (the reference's GDNKernel falls back to its SOL).

import "fmt"

// gdnSliceKey is a GDN kernel's exact geometry (TP-local heads).
type gdnSliceKey struct {
	kernel, phase                 string
	dModel, dConv, nk, hk, nv, hv int
}

// GDNShape is one GDN kernel call: kernel source, phase and TP-local geometry.
type GDNShape struct {
	Kernel, Phase         string
	DModel, DConv, NK, HK int
	NV, HV                int
}

func (g GDNShape) key() gdnSliceKey {
	return gdnSliceKey{g.Kernel, g.Phase, g.DModel, g.DConv, g.NK, g.HK, g.NV, g.HV}
}

// buildGDN indexes gdn_perf (rows are first-wins from the loader).
func (t *tables) buildGDN(d *Data) {
	pts := map[gdnSliceKey][]gridPoint{}
	for i := range d.GDN {
		r := &d.GDN[i]
		k := gdnSliceKey{r.Kernel, r.Phase, r.DModel, r.DConv, r.NumKHeads, r.HK, r.NumVHeads, r.HV}
		c := [maxAxes]int{r.Batch, r.SeqLen}
		if r.Phase == "generation" {
			c = [maxAxes]int{r.Batch}
		}
		pts[k] = append(pts[k], gridPoint{c: c, l: newLeaf(r.Latency, r.Power)})
	}
	t.gdn = map[gdnSliceKey]*grid{}
	for k, p := range pts {
		n := 2
		if k.phase == "generation" {
			n = 1
		}
		t.gdn[k] = buildGrid(n, p)
	}
}

// gdnSOL is GDNKernel.get_sol: the kernel's bytes over memory bandwidth.
type gdnSOL struct {
	g     GDNShape
	memBW float64
	seq   float64 // generation: the fixed seq the batch curve is queried at
}

func (a *gdnSOL) at(b, s float64) float64 {
	g := a.g
	x := b
	if g.Phase == "context" && s > 0 {
		x = b * s
	}
	nk, hk, nv, hv := float64(g.NK), float64(g.HK), float64(g.NV), float64(g.HV)
	conv := 2*nk*hk + nv*hv
	state := nv * hk * hv
	chunks := 0.0
	if s > 0 {
		chunks = float64(int64(s / 64))
	}
	hChunks := chunks * state * 2 * b
	var rd, wr float64
	switch g.Kernel {
	case "causal_conv1d_fn", "causal_conv1d_update":
		rd, wr = x*conv*(float64(g.DConv)+1)*2, x*conv*2
	case "chunk_gated_delta_rule":
		rd, wr = x*(2*nk*hk+nv*hv)*2+state*4*b+hChunks, x*nv*hv*2+state*4*b+hChunks
	case "fused_sigmoid_gating_delta_rule_update":
		rd, wr = x*(2*nk*hk+nv*hv)*2+state*4*b, x*nv*hv*2+state*4*b
	default:
		rd, wr = x*float64(g.DModel)*2, x*float64(g.DModel)*2
	}
	return (rd + wr) / max(a.memBW, 1) * 1000
}

func (a *gdnSOL) sol(c pt) float64 {
	if a.g.Phase == "generation" {
		return a.at(c[0], a.seq)
	}
	return a.at(c[0], c[1])
}

// gdnAliases are vLLM 0.24.0's persisted physical kernel names of a logical
// GDN kernel; its own physical rows take precedence over donor rows.
func gdnAliases(backend, version, kernel, phase string) []string {
	if backend != "vllm" || version != "0.24.0" {
		return nil
	}
	switch {
	case kernel == "chunk_gated_delta_rule" && phase == "context":
		return []string{"chunk_gated_delta_rule_flashinfer", "chunk_gated_delta_rule_triton", "chunk_gated_delta_rule_cutedsl"}
	case kernel == "fused_sigmoid_gating_delta_rule_update" && phase == "generation":
		return []string{"fused_recurrent_gated_delta_rule_packed_decode"}
	}
	return nil
}

// GDN is one GDN kernel's latency (GdnOp::query without the scale factor):
// batch b and seq_len s (context) or b (generation, s the KV position).
// Source is SOL when the table has no slice for the exact geometry.
func (q *Querier) GDN(g GDNShape, b, s int) (Perf, error) {
	if err := checkDims("GDN "+g.Kernel, []string{"batch", "seq_len"}, b, s); err != nil {
		return Perf{}, err
	}
	if g.Phase != "context" && g.Phase != "generation" {
		return Perf{}, fmt.Errorf("GDN %s: phase %q; use context or generation", g.Kernel, g.Phase)
	}
	sol := &gdnSOL{g: g, memBW: q.sys.MemBW, seq: float64(s)}
	var gr *grid
	var ambiguous []string
	for _, a := range gdnAliases(q.backend, q.version, g.Kernel, g.Phase) {
		k := g.key()
		k.kernel = a
		if x, ok := q.gdn[k]; ok {
			gr = x
			ambiguous = append(ambiguous, a)
		}
	}
	var err error
	switch {
	case len(ambiguous) > 1:
		err = missf("ambiguous vLLM 0.24.0 GDN physical kernels for %s: %v", g.Kernel, ambiguous)
	case gr == nil:
		var ok bool
		if gr, ok = q.gdn[g.key()]; !ok {
			err = missf("GDN data missing for %+v", g)
		}
	}
	if err == nil {
		var l leaf
		c := pt{float64(b), float64(s)}
		cfg := &gdnCtxCfg
		if g.Phase == "generation" {
			c, cfg = pt{float64(b)}, &gdnGenCfg
		} else if s == 0 {
			err = missf("GDN context query needs seq_len > 0")
		}
		if err == nil {
			if l, err = gr.query(cfg, sol, c); err == nil {
				return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}, nil
			}
		}
	}
	if IsMiss(err) {
		return Perf{LatencyMs: sol.at(float64(b), float64(s)), Source: SourceSOL}, nil
	}
	return Perf{}, err
}

var (
	gdnCtxCfg = gridCfg{axes: []string{"batch", "seq_len"}, sqrtAxis: -1, kTail: 1, nnLeaves: 4}
	gdnGenCfg = gridCfg{axes: []string{"batch"}, sqrtAxis: -1, kTail: 1, nnLeaves: 4}
)
