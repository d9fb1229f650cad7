package perfdb

import (
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// buildSiteIndexWalk is the dict walk buildSiteIndex replaces, step by step as
// aiconfigurator's loader does it (first-seen m, per m first-seen n, per (m, n)
// first-seen k; the first row at a coordinate wins): the reference of
// TestSiteIndexMatchesDictWalk.
func buildSiteIndexWalk(rows []gemmPoint) *siteIndex {
	type key struct{ m, n, k int }
	seen := map[key]bool{}
	curves := map[[2]int][]siteCurvePoint{}
	var mOrder []int
	nOrder := map[int][]int{}
	kOrder := map[[2]int][]int{}
	for _, r := range rows {
		if seen[key{r.m, r.n, r.k}] {
			continue
		}
		seen[key{r.m, r.n, r.k}] = true
		if _, ok := nOrder[r.m]; !ok {
			mOrder = append(mOrder, r.m)
		}
		if !slices.Contains(nOrder[r.m], r.n) {
			nOrder[r.m] = append(nOrder[r.m], r.n)
		}
		kOrder[[2]int{r.m, r.n}] = append(kOrder[[2]int{r.m, r.n}], r.k)
		curves[[2]int{r.n, r.k}] = append(curves[[2]int{r.n, r.k}], siteCurvePoint{m: float64(r.m), l: r.l})
	}
	idx := &siteIndex{byKey: map[[2]int]int{}, kTail: 3, nn: 4, gate: 2.0}
	for _, m := range mOrder {
		for _, n := range nOrder[m] {
			for _, k := range kOrder[[2]int{m, n}] {
				sk := [2]int{n, k}
				if _, ok := idx.byKey[sk]; ok {
					continue
				}
				cv := curves[sk]
				slices.SortStableFunc(cv, func(a, b siteCurvePoint) int {
					switch {
					case a.m < b.m:
						return -1
					case a.m > b.m:
						return 1
					}
					return 0
				})
				idx.byKey[sk] = len(idx.sites)
				idx.sites = append(idx.sites, site{n: float64(n), k: float64(k), ln: log2Floor(float64(n)), lk: log2Floor(float64(k)), curve: cv})
			}
		}
	}
	return idx
}

// TestSiteIndexMatchesDictWalk: buildSiteIndex numbers the same sites in the
// same order with the same curves as the dict walk, on random rows with repeated
// coordinates (first row wins) in any order.
func TestSiteIndexMatchesDictWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dim := rapid.SampledFrom([]int{1, 2, 16, 64, 4096, 7168})
		rows := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) gemmPoint {
			return gemmPoint{m: rapid.IntRange(1, 6).Draw(t, "m"), n: dim.Draw(t, "n"), k: dim.Draw(t, "k"),
				l: newLeaf(rapid.Float64Range(0.001, 10).Draw(t, "lat"), 1)}
		}), 0, 60).Draw(t, "rows")
		if len(rows) > 0 && rapid.Bool().Draw(t, "wide") { // a dimension too wide for the packed sort keys
			rows[rapid.IntRange(0, len(rows)-1).Draw(t, "at")].k = 1 << packBits
		}
		got, want := buildSiteIndex(rows), buildSiteIndexWalk(rows)
		if len(want.sites) == 0 { // nil and empty site lists are the same index
			want.sites = got.sites[:0:0]
			got.sites = want.sites
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("site index differs from the dict walk\ngot  %+v\nwant %+v", got.sites, want.sites)
		}
	})
}

// BenchmarkBuildSiteIndex builds the GEMM site index of h200_sxm vllm 0.22.0's
// fp8 rows (what every process pricing a pass of an fp8 model does once).
func BenchmarkBuildSiteIndex(b *testing.B) {
	d, err := h200Vllm022()
	if err != nil {
		b.Fatal(err)
	}
	var rows []gemmPoint
	for _, r := range d.Gemm {
		if r.Dtype == "fp8" {
			rows = append(rows, gemmPoint{m: r.M, n: r.N, k: r.K, l: newLeaf(r.Latency, r.Power)})
		}
	}
	b.Run("sorted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buildSiteIndex(rows)
		}
	})
	b.Run("walk", func(b *testing.B) { // the former map-based walk
		b.ReportAllocs()
		for b.Loop() {
			buildSiteIndexWalk(rows)
		}
	})
}
