package perfdb

// compose.go turns a model's op list into the latency of an engine phase
// (aiconfigurator's engine/runtime.rs + session.rs: run_context_ops,
// run_generation_ops_step). Each op carries its shape and a scale factor (how
// many times it repeats: layers × MTP scale); the kernel latency comes from a
// kernels source (a *Querier in production, fakes in tests).

import (
	"fmt"
	"math"
)

// kernels is the slice of the Querier API composition needs. *Querier
// implements it; tests substitute fakes to check the arithmetic.
type kernels interface {
	GemmOp(quant GemmQuant, m, n, k int, lowPrecisionInput bool) (Perf, error)
	ContextAttention(b, s, prefix, nHeads, nKV, headDim, window int, kvQuant KVQuant, fmhaQuant FMHAQuant) (Perf, error)
	GenerationAttention(b, s, nHeads, nKV, headDim, window int, kvQuant KVQuant) (Perf, error)
	CustomAllReduce(quant CommQuant, tp int, size float64) (Perf, error)
	NCCL(quant CommQuant, numGPUs int, op string, size float64) (Perf, error)
	MoE(a MoEArgs, numTokens int) (Perf, error)
	MemOp(bytes float64) (Perf, error)
	P2P(bytes float64) (Perf, error)
	MLAContextModule(b, s, prefix, heads, native int, kv KVQuant, fmha FMHAQuant, gemm GemmQuant, siliconOnly bool) (Perf, error)
	MLAGenerationModule(b, s, heads, native int, kv KVQuant, gemm GemmQuant, siliconOnly bool) (Perf, error)
	MLAContext(b, s, prefix, heads int, kv KVQuant, fmha FMHAQuant) (Perf, error)
	MLAGeneration(b, s, heads int, kv KVQuant) (Perf, error)
	MLABmm(tokens, heads int, quant GemmQuant, pre bool) (Perf, error)
	DSAContext(b, s, prefix, heads int, arch string, kv KVQuant, fmha FMHAQuant, gemm GemmQuant) (Perf, error)
	DSAGeneration(b, s, heads int, arch string, kv KVQuant, gemm GemmQuant) (Perf, error)
	GemmBelowGridSOL(quant GemmQuant, m, n, k int) (Perf, bool, error)
	GDN(g GDNShape, b, s int) (Perf, error)
	MoEA2A(backend, phase string, ep, nodes, hidden, topk, experts, sms, tokens int) (Perf, error)
	WideEPExpert(a MoEArgs, phase string, tokens int) (Perf, error)
	WideEPContextMLA(batch, s, prefix, heads int, kernel string, kv KVQuant, fmha FMHAQuant) (Perf, error)
	WideEPGenerationMLA(batch, s, heads int, kernel string, kv KVQuant) (Perf, error)
}

// opKind enumerates the operator types of the LLAMA and MOE op lists.
type opKind uint8

const (
	opEmbedding     opKind = iota // memory-bound row lookup: tokens·h·2 bytes
	opElementwise                 // memory-bound: tokens·(2·dimIn + 2·dimOut) bytes
	opGemm                        // m = tokens, n, k
	opContextAttn                 // prefill FMHA + fused RoPE/KV-write(/qk-norm) extras ×1.1
	opGenAttn                     // decode attention
	opAllReduce                   // custom all-reduce of tokens·h elements over tp
	opP2P                         // pipeline hop: tokens·h·2 bytes
	opMoE                         // fused MoE expert compute
	opMoEDispatch                 // pre/post MoE dispatch communication
	opMLACtxModule                // fused context MLA module (one layer's MLA block)
	opMLAGenModule                // fused decode MLA module
	opFallback                    // primary op; on a table miss, the sum of the fallback ops
	opOverlap                     // two op groups on parallel streams: max latency, summed energy
	opMLAContext                  // op-level context MLA (latent attention kernel)
	opMLAGeneration               // op-level decode MLA
	opMLABmm                      // absorbed-MLA BMM (pre or post), tokens = the phase batch
	opDSACtx                      // context DSA module (indexer + top-k sparse MLA block)
	opDSAGen                      // decode DSA module
	opGDN                         // a Gated-DeltaNet kernel (conv1d or delta rule)
	opMoEA2A                      // wide-EP all-to-all phase (DeepEP dispatch or combine)
	opWideEPExpert                // wide-EP expert compute behind the all-to-all
	opWideEPCtxMLA                // SGLang's DeepEP context MLA module
	opWideEPGenMLA                // SGLang's DeepEP decode MLA module
)

// op is one entry of a context or generation op list (aiconfigurator
// operators/*.rs, the fields a LLAMA/MOE list uses).
type op struct {
	name  string
	kind  opKind
	scale float64 // scale_factor: repetitions (layers × MTP scale)

	// GEMM
	n, k    int
	gemmQ   GemmQuant
	lowPrec bool // low_precision_input (o-proj, down-proj): fp8_static subtracts scale_matrix too
	logits  bool // the logits GEMM sees m = batch in the context phase

	// memory-bound ops: bytes per token
	bytesPerToken float64

	// attention (heads per GPU)
	heads, kvHeads, headDim, window int
	kvQ                             KVQuant
	fmhaQ                           FMHAQuant
	qkNorm                          bool

	// communication
	hidden int // elements per token
	tp     int // all-reduce group (tp) or pipeline size (pp) for P2P

	// MoE and dispatch
	moe      MoEArgs
	pre      bool   // dispatch: pre (true) or combine (false)
	backend  string // dispatch: vllm | sglang | trtllm
	smVer    int    // dispatch: system sm_version (trtllm branch)
	nvl72    bool   // dispatch: num_gpus_per_node ≥ 72
	weightsB float64

	// MLA module: the model's native head count keys the module table.
	native int
	// DSA module: the architecture keys the table and its dims.
	arch string
	// GDN kernel geometry.
	gdn GDNShape
	// wide-EP: the all-to-all backend (deepep_ht | deepep_ll) and phase
	// (dispatch | combine; the expert compute's inference phase), the EP
	// group's node count and the DeepEP SM budget; tp divides the
	// all-to-all's tokens (attention TP), kernel is the MLA attention backend.
	a2a, phase string
	nodes, sms int
	kernel     string
	// belowGridSOL: a GEMM shape outside the collected grid is priced at its
	// SOL in SILICON mode (the reference's below_grid_sol opt-in).
	belowGridSOL bool
	// attnAR: the model prices the attention all-reduce itself, so vLLM's
	// pre-dispatch does not add its all-reduce proxy (attn_ar_modeled).
	attnAR bool

	// composites: opFallback runs sub[0] as the primary and sub[1:] as the
	// fallback chain; opOverlap runs sub[:split] against sub[split:].
	sub   []op
	split int
}

// isContextAttention and isGenerationAttention are the name filters of the
// mixed-step passes (session.rs ContextOpFilter).
func (o *op) isContextAttention() bool    { return o.name == "context_attention" }
func (o *op) isGenerationAttention() bool { return o.name == "generation_attention" }

// query prices one op. batch is the phase batch, s the per-request sequence
// (new tokens for context ops, KV length for decode attention), prefix the
// cached prefix, x the token count token-major ops see.
func (o *op) query(ks kernels, batch, s, prefix, x int) (Perf, error) {
	var r Perf
	var err error
	switch o.kind {
	case opEmbedding, opElementwise:
		r, err = ks.MemOp(o.bytesPerToken * float64(x))
	case opGemm:
		r, err = ks.GemmOp(o.gemmQ, x, o.n, o.k, o.lowPrec)
		if err != nil && o.belowGridSOL && IsMiss(err) && o.gemmQ != GemmFP8Static {
			if p, ok, e2 := ks.GemmBelowGridSOL(o.gemmQ, x, o.n, o.k); ok || e2 != nil {
				r, err = p, e2
			}
		}
	case opContextAttn:
		r, err = o.contextAttention(ks, batch, s, prefix)
	case opGenAttn:
		r, err = ks.GenerationAttention(batch, s, o.heads, o.kvHeads, o.headDim, o.window, o.kvQ)
	case opAllReduce:
		if o.tp <= 1 {
			return Perf{Source: SourceEmpirical}, nil
		}
		r, err = ks.CustomAllReduce(CommHalf, o.tp, float64(x)*float64(o.hidden))
	case opP2P:
		if o.tp <= 1 {
			return Perf{}, nil
		}
		r, err = ks.P2P(float64(x) * float64(o.hidden) * 2)
	case opMoE:
		r, err = ks.MoE(o.moe, x)
	case opMoEDispatch:
		r, err = o.dispatch(ks, x)
	case opMLACtxModule, opMLAGenModule:
		r, err = o.mlaModule(ks, batch, s, prefix, false)
	case opFallback:
		return o.fallback(ks, batch, s, prefix, x)
	case opOverlap:
		return o.overlap(ks, batch, s, prefix, x)
	case opMLAContext:
		r, err = ks.MLAContext(batch, s, prefix, o.heads, o.kvQ, o.fmhaQ)
	case opMLAGeneration:
		r, err = ks.MLAGeneration(batch, s, o.heads, o.kvQ)
	case opMLABmm:
		// The reference indexes the BMM table by the op's batch (its
		// per-request row count), not the token count.
		r, err = ks.MLABmm(batch, o.heads, o.gemmQ, o.pre)
	case opDSACtx:
		r, err = ks.DSAContext(batch, s, prefix, o.heads, o.arch, o.kvQ, o.fmhaQ, o.gemmQ)
	case opDSAGen:
		r, err = ks.DSAGeneration(batch, s, o.heads, o.arch, o.kvQ, o.gemmQ)
	case opGDN:
		r, err = ks.GDN(o.gdn, batch, s)
	case opMoEA2A:
		a := o.moe
		r, err = ks.MoEA2A(o.a2a, o.phase, a.MoEEP, o.nodes, a.Hidden, a.TopK, a.NumExperts, o.sms, x/max(o.tp, 1))
	case opWideEPExpert:
		r, err = ks.WideEPExpert(o.moe, o.phase, x)
	case opWideEPCtxMLA:
		r, err = ks.WideEPContextMLA(batch, s, prefix, o.heads, o.kernel, o.kvQ, o.fmhaQ)
	case opWideEPGenMLA:
		r, err = ks.WideEPGenerationMLA(batch, s, o.heads, o.kernel, o.kvQ)
	default:
		return Perf{}, fmt.Errorf("op %s: unknown kind %d", o.name, o.kind)
	}
	if err != nil {
		return Perf{}, fmt.Errorf("%s: %w", o.name, err)
	}
	return r.ClampNonNegative().Scaled(o.scale), nil
}

// contextAttention is ContextAttentionOp::query without the scale factor: the
// table value plus 1.1× the fused extras, each a per-layer memory op whose byte
// count does NOT scale with tokens (PERFDB.md §2.1 surprise, kept on purpose):
// qk-norm 2·(2·mem(2q) + 2·mem(2k)), RoPE 2·mem(2q + 2k), KV write
// mem(k·b_fmha) + mem(v·b_fmha).
func (o *op) contextAttention(ks kernels, batch, s, prefix int) (Perf, error) {
	r, err := ks.ContextAttention(batch, s, prefix, o.heads, o.kvHeads, o.headDim, o.window, o.kvQ, o.fmhaQ)
	if err != nil {
		return Perf{}, err
	}
	fm, err := o.fmhaQ.Mapping()
	if err != nil {
		return Perf{}, err
	}
	q := float64(o.heads * o.headDim)
	kv := float64(o.kvHeads * o.headDim)
	mem := func(b float64) (Perf, error) { return ks.MemOp(b) }
	extra := Perf{Source: SourceEmpirical}
	if o.qkNorm {
		a, err := mem(q * 2)
		if err != nil {
			return Perf{}, err
		}
		b, err := mem(kv * 2)
		if err != nil {
			return Perf{}, err
		}
		extra = extra.Plus(a.Scaled(2).Plus(b.Scaled(2)).Scaled(2))
	}
	rope, err := mem(q*2 + kv*2)
	if err != nil {
		return Perf{}, err
	}
	kw, err := mem(kv * fm.Memory)
	if err != nil {
		return Perf{}, err
	}
	extra = extra.Plus(rope.Scaled(2).Plus(kw.Plus(kw)))
	return r.Plus(extra.Scaled(1.1)), nil
}

// mlaModule is MlaModuleOp::query_context / query_generation without the
// scale factor; siliconOnly is the HYBRID primary of a fallback op.
func (o *op) mlaModule(ks kernels, batch, s, prefix int, siliconOnly bool) (Perf, error) {
	if o.kind == opMLACtxModule {
		return ks.MLAContextModule(batch, s, prefix, o.heads, o.native, o.kvQ, o.fmhaQ, o.gemmQ, siliconOnly)
	}
	return ks.MLAGenerationModule(batch, s, o.heads, o.native, o.kvQ, o.gemmQ, siliconOnly)
}

// fallback is FallbackOp::query: the primary (an MLA module, priced on a
// silicon view in HYBRID so a missing module table is not estimated), else,
// on a structured table miss, the fallback chain summed.
func (o *op) fallback(ks kernels, batch, s, prefix, x int) (Perf, error) {
	p := &o.sub[0]
	r, err := p.mlaModule(ks, batch, s, prefix, true)
	if err == nil {
		return r.ClampNonNegative().Scaled(p.scale), nil
	}
	if !IsMiss(err) {
		return Perf{}, fmt.Errorf("%s: %w", p.name, err)
	}
	total := Perf{Source: SourceEmpirical}
	for i := range o.sub[1:] {
		v, err := o.sub[1+i].query(ks, batch, s, prefix, x)
		if err != nil {
			return Perf{}, err
		}
		total = total.Plus(v)
	}
	return total.ClampNonNegative(), nil
}

// overlap is OverlapOp::query: latency max(Σa, Σb), energy Σa + Σb.
func (o *op) overlap(ks kernels, batch, s, prefix, x int) (Perf, error) {
	sum := func(ops []op) (Perf, error) {
		t := Perf{Source: SourceEmpirical}
		for i := range ops {
			v, err := ops[i].query(ks, batch, s, prefix, x)
			if err != nil {
				return Perf{}, err
			}
			t = t.Plus(v)
		}
		return t, nil
	}
	a, err := sum(o.sub[:o.split])
	if err != nil {
		return Perf{}, err
	}
	b, err := sum(o.sub[o.split:])
	if err != nil {
		return Perf{}, err
	}
	m := a.Plus(b)
	return Perf{LatencyMs: math.Max(a.LatencyMs, b.LatencyMs), EnergyWms: a.EnergyWms + b.EnergyWms, Source: m.Source}.ClampNonNegative(), nil
}

// dispatch is MoEDispatchOp::query for the fused (non-large-EP) path: vLLM and
// SGLang ride the custom all-reduce / NCCL flavor, TRT-LLM its own branch
// (moe_dispatch.rs). Sub-queries are unscaled; the caller scales once.
func (o *op) dispatch(ks kernels, x int) (Perf, error) {
	a := o.moe
	numGPUs := max(a.MoETP*a.MoEEP, 1)
	dp := max(a.AttentionDP, 1)
	attnTP := max(numGPUs/dp, 1)
	h := float64(o.hidden)
	ar := func(tokens int) (float64, error) {
		if numGPUs <= 1 {
			return 0, nil
		}
		r, err := ks.CustomAllReduce(CommHalf, numGPUs, float64(tokens)*h)
		return max(r.LatencyMs, 0), err
	}
	nccl := func(g int, opName string, tokens int, perTok float64) (float64, error) {
		if g <= 1 {
			return 0, nil
		}
		r, err := ks.NCCL(CommHalf, g, opName, float64(tokens)*perTok)
		return max(r.LatencyMs, 0), err
	}
	gatherOrScatter := NCCLReduceScatter
	if o.pre {
		gatherOrScatter = NCCLAllGather
	}
	var total float64
	switch o.backend {
	case "vllm":
		if attnTP > 1 && !(o.pre && o.attnAR) {
			v, err := ar(x)
			if err != nil {
				return Perf{}, err
			}
			total += v
		}
		if dp > 1 {
			v, err := nccl(numGPUs, gatherOrScatter, x*dp, h)
			if err != nil {
				return Perf{}, err
			}
			total += v
		}
	case "sglang":
		switch {
		case attnTP > 1 && dp > 1:
			var v1, v2 float64
			var err error
			if o.pre {
				if v1, err = nccl(attnTP, NCCLReduceScatter, x, h); err == nil {
					v2, err = nccl(numGPUs, NCCLAllGather, x*dp, h)
				}
			} else {
				if v1, err = nccl(numGPUs, NCCLReduceScatter, x*dp, h); err == nil {
					v2, err = nccl(attnTP, NCCLAllGather, x, h)
				}
			}
			if err != nil {
				return Perf{}, err
			}
			total = v1 + v2
		case attnTP > 1:
			v, err := ar(x)
			if err != nil {
				return Perf{}, err
			}
			total = v
		case dp > 1:
			v, err := nccl(numGPUs, gatherOrScatter, x*dp, h)
			if err != nil {
				return Perf{}, err
			}
			total = v
		}
	case "trtllm":
		var err error
		switch {
		case o.smVer == 100 && dp > 1 && a.MoETP == 1 && o.nvl72:
			return Perf{}, fmt.Errorf("trtllm alltoall dispatch (NVL72 attention-DP) is not modeled")
		case o.smVer == 100 && dp > 1:
			if o.pre {
				xf, sf := 1.0, 0.0
				switch a.Quant {
				case MoENVFP4:
					xf, sf = 0.25, 0.25/8
				case MoEFP8, MoEFP8Block:
					xf = 0.5
				}
				total, err = nccl(numGPUs, NCCLAllGather, x*dp, h*(xf+sf))
			} else {
				total, err = nccl(numGPUs, NCCLReduceScatter, x*dp, h)
			}
		case attnTP > 1:
			total, err = ar(x)
		case dp > 1:
			total, err = nccl(numGPUs, gatherOrScatter, x*dp, h)
		}
		if err != nil {
			return Perf{}, err
		}
	default:
		return Perf{}, fmt.Errorf("moe dispatch: unknown backend %q", o.backend)
	}
	return Perf{LatencyMs: total, Source: SourceSilicon}, nil
}

// phaseCtx runs the context op list (session.rs run_context_ops_with): batch
// requests of s new tokens after prefix; token-major ops see batch·s tokens, the
// logits GEMM sees batch. filter selects the mixed-step passes.
func runContext(ks kernels, ops []op, batch, s, prefix int, filter ctxFilter) (Perf, error) {
	total := Perf{}
	for i := range ops {
		o := &ops[i]
		switch {
		case filter == skipContextAttention && o.isContextAttention():
			continue
		case filter == onlyContextAttention && !o.isContextAttention():
			continue
		}
		x := batch * s
		if o.logits {
			x = batch
		}
		r, err := o.query(ks, batch, s, prefix, x)
		if err != nil {
			return Perf{}, err
		}
		total = total.Plus(r)
	}
	return total, nil
}

// ctxFilter selects the context ops of a mixed-step pass.
type ctxFilter uint8

const (
	allOps ctxFilter = iota
	skipContextAttention
	onlyContextAttention
)

// runGenStep runs one decode step of the generation op list at batch bs and KV
// length s (session.rs run_generation_ops_step: x = bs·beam with beam 1).
func runGenStep(ks kernels, ops []op, bs, s int, onlyAttention bool) (Perf, error) {
	total := Perf{}
	for i := range ops {
		o := &ops[i]
		if onlyAttention && !o.isGenerationAttention() {
			continue
		}
		r, err := o.query(ks, bs, s, 0, bs)
		if err != nil {
			return Perf{}, err
		}
		total = total.Plus(r)
	}
	return total, nil
}

// finite reports an error for a NaN or infinite result.
func finite(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s is not finite (%v); the perf data gave an unusable value", name, v)
	}
	return nil
}
