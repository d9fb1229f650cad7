package perfdb

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// buildMoEIndexMaps is the nested-map grouping buildMoEIndex replaces (one
// map walk per row): the reference of TestMoEIndexMatchesMaps.
func buildMoEIndexMaps(rows []MoERow, sys *System) *moeIndex {
	idx := &moeIndex{byQuant: map[string]map[string]map[moeShape]*moeSlice{}}
	pts := map[string]map[string]map[moeShape][]curvePoint{}
	for _, r := range rows {
		qn := moeQuantRewrite(r.Dtype, r.Kernel)
		if _, ok := pts[qn]; !ok {
			pts[qn] = map[string]map[moeShape][]curvePoint{}
			idx.quants = append(idx.quants, qn)
		}
		if _, ok := pts[qn][r.Distribution]; !ok {
			pts[qn][r.Distribution] = map[moeShape][]curvePoint{}
		}
		sh := moeShape{r.TopK, r.NumExperts, r.Hidden, r.Inter, r.MoETP, r.MoEEP}
		pts[qn][r.Distribution][sh] = append(pts[qn][r.Distribution][sh], curvePoint{x: float64(r.NumTokens), l: newLeaf(r.Latency, r.Power)})
	}
	for qn, byDist := range pts {
		idx.byQuant[qn] = map[string]map[moeShape]*moeSlice{}
		for dist, byShape := range byDist {
			idx.byQuant[qn][dist] = map[moeShape]*moeSlice{}
			for sh, p := range byShape {
				sl := &moeSlice{cv: newCurveMap("num_tokens", p)}
				for g := 0; g < 2; g++ {
					if s, err := moeSOLOf(sys, MoEQuant(qn), g == 1, sh); err == nil {
						sl.sol[g] = &s
					}
				}
				idx.byQuant[qn][dist][sh] = sl
			}
		}
	}
	return idx
}

// newCurveMap is the map-deduplicating newCurve (first point at an x wins,
// then a stable sort): the reference of TestNewCurveMatchesMap.
func newCurveMap(axis string, pts []curvePoint) *curve {
	out := make([]curvePoint, 0, len(pts))
	seen := make(map[float64]bool, len(pts))
	for _, p := range pts {
		if !seen[p.x] {
			seen[p.x] = true
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b curvePoint) int {
		switch {
		case a.x < b.x:
			return -1
		case a.x > b.x:
			return 1
		}
		return 0
	})
	return &curve{axis: axis, pts: out}
}

func TestNewCurveMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		xs := rapid.SampledFrom([]float64{1, 2, 3, 8, 1024, math.Copysign(0, -1), 0})
		pts := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) curvePoint {
			return curvePoint{x: xs.Draw(t, "x"), l: newLeaf(rapid.Float64Range(0.001, 10).Draw(t, "lat"), 1)}
		}), 0, 40).Draw(t, "pts")
		if rapid.Bool().Draw(t, "nan") && len(pts) > 0 {
			pts[rapid.IntRange(0, len(pts)-1).Draw(t, "at")].x = math.NaN()
		}
		got, want := newCurve("x", pts), newCurveMap("x", pts)
		if len(got.pts) != len(want.pts) {
			t.Fatalf("%d points, want %d\ngot  %+v\nwant %+v", len(got.pts), len(want.pts), got.pts, want.pts)
		}
		for i := range got.pts {
			g, w := got.pts[i], want.pts[i]
			if math.Float64bits(g.x) != math.Float64bits(w.x) || g.l != w.l {
				t.Fatalf("point %d: got %+v, want %+v", i, g, w)
			}
		}
	})
}

func TestMoEIndexMatchesMaps(t *testing.T) {
	sys := &System{Name: "t", MemBW: 4.8e12, BF16TCFlops: 989e12, FP8TCFlops: 1979e12}
	rapid.Check(t, func(t *rapid.T) {
		dtype := rapid.SampledFrom([]string{"fp8", "float16", "w4a16_mxfp4"})
		kernel := rapid.SampledFrom([]string{"k", "sglang_flashinfer_cutlass_moe"})
		dist := rapid.SampledFrom([]string{"uniform", "power_law_1.2"})
		small := rapid.SampledFrom([]int{1, 2, 8})
		rows := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) MoERow {
			return MoERow{Kernel: kernel.Draw(t, "kernel"), Dtype: dtype.Draw(t, "dtype"), Distribution: dist.Draw(t, "dist"),
				TopK: small.Draw(t, "topk"), NumExperts: 8 * small.Draw(t, "e"), Hidden: 1024, Inter: 512,
				MoETP: small.Draw(t, "tp"), MoEEP: small.Draw(t, "ep"), NumTokens: rapid.IntRange(1, 5).Draw(t, "tokens"),
				Latency: rapid.Float64Range(0.001, 10).Draw(t, "lat"), Power: rapid.Float64Range(0, 700).Draw(t, "power")}
		}), 0, 60).Draw(t, "rows")
		got, want := buildMoEIndex(rows, sys), buildMoEIndexMaps(rows, sys)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("MoE index differs from the nested-map grouping\ngot  %+v\nwant %+v", got, want)
		}
	})
}

// BenchmarkBuildMoEIndex builds the MoE index of h200_sxm sglang 0.5.14's
// standard MoE table (what every process pricing a pass of a MoE model does
// once).
func BenchmarkBuildMoEIndex(b *testing.B) {
	if testing.Short() {
		b.Skip("loads the embedded sglang data (seconds)")
	}
	d, err := LoadEmbedded(context.Background(), "h200_sxm", "sglang", "0.5.14", WithoutSnapshot())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("grouped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buildMoEIndex(d.MoE, d.System)
		}
	})
	b.Run("maps", func(b *testing.B) { // the former nested-map grouping
		b.ReportAllocs()
		for b.Loop() {
			buildMoEIndexMaps(d.MoE, d.System)
		}
	})
}
