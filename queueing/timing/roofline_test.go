package timing

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestRooflineValues: hand-computed passes (compute-bound prefill, memory-bound decode).
func TestRooflineValues(t *testing.T) {
	r := Roofline{BaseMs: 1, WeightsMs: 10, TokenMs: 0.01, AttnMsPerPair: 1e-6, KVMsPerToken: 1e-4}
	// 2048-token chunk after 2048 computed: pairs = 2048·(2048 + 2049/2) = 6,292,480;
	// compute = 20.48 + 6.29248 = 26.77248; memory = 10 + 0.4096 → compute-bound.
	p := Pass{Prefill: []Chunk{{Tokens: 2048, Computed: 2048}}}
	if got, want := mustMs(t, r, &p), 1+20.48+6.29248; math.Abs(got-want) > 1e-9 {
		t.Errorf("prefill pass %v, want %v", got, want)
	}
	// 32 decode rows at context 4096: compute = 0.32 + 0.131072; memory = 10 + 13.1072.
	d := Pass{Decode: make([]int, 32)}
	for i := range d.Decode {
		d.Decode[i] = 4096
	}
	if got, want := mustMs(t, r, &d), 1+10+13.1072; math.Abs(got-want) > 1e-9 {
		t.Errorf("decode pass %v, want %v", got, want)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	if err := (Roofline{BaseMs: -1}).Validate(); err == nil {
		t.Error("negative base accepted")
	}
	if err := (Roofline{}).Validate(); err == nil {
		t.Error("zero-time passes accepted")
	}
	if err := (Roofline{TokenMs: 1}).Validate(); err != nil {
		t.Errorf("compute-only roofline rejected: %v", err)
	}
}

// TestRooflineMonotone: more tokens, rows or context never make a pass cheaper.
func TestRooflineMonotone(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := Roofline{
			BaseMs: rapid.Float64Range(0, 5).Draw(rt, "base"), WeightsMs: rapid.Float64Range(0, 20).Draw(rt, "w"),
			TokenMs: rapid.Float64Range(0, 0.05).Draw(rt, "tok"), AttnMsPerPair: rapid.Float64Range(0, 1e-5).Draw(rt, "attn"),
			KVMsPerToken: rapid.Float64Range(0, 1e-3).Draw(rt, "kv"),
		}
		n := rapid.IntRange(1, 4096).Draw(rt, "n")
		c := rapid.IntRange(0, 8192).Draw(rt, "c")
		rows := rapid.IntRange(0, 64).Draw(rt, "rows")
		ctx := rapid.IntRange(1, 8192).Draw(rt, "ctx")
		mk := func(n, c, rows, ctx int) *Pass {
			p := &Pass{Prefill: []Chunk{{Tokens: n, Computed: c}}, Decode: make([]int, rows)}
			for i := range p.Decode {
				p.Decode[i] = ctx
			}
			return p
		}
		base := mustMs(rt, r, mk(n, c, rows, ctx))
		for _, q := range []*Pass{mk(n+1, c, rows, ctx), mk(n, c+1, rows, ctx), mk(n, c, rows+1, ctx), mk(n, c, rows, ctx+1)} {
			if v := mustMs(rt, r, q); v < base-1e-12 {
				rt.Fatalf("pass %+v costs %v < %v", q, v, base)
			}
		}
	})
}

// mustMs prices p with a timing that never fails, failing the test otherwise.
func mustMs(tb interface{ Fatalf(string, ...any) }, tm Timing, p *Pass) float64 {
	v, err := tm.PassMs(p)
	if err != nil {
		tb.Fatalf("pass %+v: %v", p, err)
	}
	return v
}

// TestDecodeOnlyMs: for Linear and Roofline, DecodeOnlyMs(D, X) is PassMs of any
// decode-only pass of D rows whose contexts sum to X, bit for bit.
func TestDecodeOnlyMs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tm interface {
			Timing
			DecodeOnlyMs(rows, ctx int) (float64, error)
		}
		if rapid.Bool().Draw(rt, "roofline") {
			tm = Roofline{
				BaseMs:        rapid.Float64Range(0, 50).Draw(rt, "base"),
				WeightsMs:     rapid.Float64Range(0, 20).Draw(rt, "weights"),
				TokenMs:       rapid.Float64Range(0, 0.1).Draw(rt, "token"),
				AttnMsPerPair: rapid.Float64Range(0, 1e-5).Draw(rt, "attn"),
				KVMsPerToken:  rapid.Float64Range(0, 1e-3).Draw(rt, "kv"),
			}
		} else {
			tm = Linear{
				BaseMs:            rapid.Float64Range(0, 50).Draw(rt, "base"),
				PrefillMsPerToken: rapid.Float64Range(0, 1).Draw(rt, "prefill"),
				DecodeMsPerRow:    rapid.Float64Range(0, 1).Draw(rt, "row"),
				CtxMsPerToken:     rapid.Float64Range(0, 1e-3).Draw(rt, "ctx"),
			}
		}
		p := Pass{Decode: rapid.SliceOfN(rapid.IntRange(1, 1<<20), 1, 300).Draw(rt, "rows")}
		want, _ := tm.PassMs(&p)
		got, err := tm.DecodeOnlyMs(len(p.Decode), p.DecodeContext())
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			rt.Fatalf("%T: DecodeOnlyMs %v (%v), PassMs %v", tm, got, err, want)
		}
	})
}
