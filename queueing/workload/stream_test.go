package workload

import (
	"math"
	"testing"
)

// TestArrivalStreamPeriod: each period of K gaps sums to exactly K/rate (every
// stratum once), the stream is bit-reproducible, and consecutive gaps are
// uncorrelated (|lag-1 correlation| < 3/√n), unlike a golden-ratio stride.
func TestArrivalStreamPeriod(t *testing.T) {
	const rate = 4.0
	n := 3 * ArrivalStrata
	a, err := ArrivalTimesMs(n+1, rate)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ArrivalTimesMs(n+1, rate)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("arrival %d differs between runs: %v vs %v", i, a[i], b[i])
		}
	}
	if a[0] != 0 {
		t.Errorf("first arrival at %v, want 0", a[0])
	}
	for p := 0; p < 3; p++ {
		span := a[(p+1)*ArrivalStrata] - a[p*ArrivalStrata]
		want := float64(ArrivalStrata) * 1000 / rate
		if math.Abs(span-want) > 1e-9*want {
			t.Errorf("period %d spans %v ms, want %v", p, span, want)
		}
	}
	gaps := make([]float64, n)
	for i := range gaps {
		gaps[i] = a[i+1] - a[i]
	}
	mean, v, c := 0.0, 0.0, 0.0
	for _, g := range gaps {
		mean += g
	}
	mean /= float64(n)
	for i, g := range gaps {
		v += (g - mean) * (g - mean)
		if i > 0 {
			c += (g - mean) * (gaps[i-1] - mean)
		}
	}
	if r := c / v; math.Abs(r) > 3/math.Sqrt(float64(n)) {
		t.Errorf("lag-1 correlation %v", r)
	}
	// Exponential: coefficient of variation ≈ 1 (stratum means lose < 1 %).
	if cv := math.Sqrt(v/float64(n)) / mean; cv < 0.98 || cv > 1.0 {
		t.Errorf("coefficient of variation %v, want ≈ 1", cv)
	}
	if _, err := NewArrivalStream(0); err == nil {
		t.Error("rate 0 accepted")
	}
}

// TestShapeRotation: with quantiles, every stratum pair is visited with the
// expected frequency (R2 rotation: the marginals are uniform and independent);
// without, the fixed shape.
func TestShapeRotation(t *testing.T) {
	w := Spec{ISL: 100, OSL: 10, ISLQuantiles: []int{1, 2, 3, 4}, OSLQuantiles: []int{10, 20, 30}}
	counts := map[[2]int]int{}
	const n = 12000
	for k := 0; k < n; k++ {
		i, o := w.Shape(k)
		counts[[2]int{i, o}]++
	}
	if len(counts) != 12 {
		t.Fatalf("visited %d (isl, osl) pairs, want 12", len(counts))
	}
	for p, c := range counts {
		if math.Abs(float64(c)-n/12) > 0.02*n/12 {
			t.Errorf("pair %v visited %d times, want ≈ %d", p, c, n/12)
		}
	}
	if i, o := (&Spec{ISL: 7, OSL: 3}).Shape(5); i != 7 || o != 3 {
		t.Errorf("fixed shape gave (%d, %d)", i, o)
	}
	if (&Spec{RateRPS: 1}).Fidelity() != W1 || (&Spec{Concurrency: 1}).Fidelity() != W0 || w.Fidelity() != W2 {
		t.Error("fidelity tiers")
	}
}

// TestMaxShapeBoundsEveryRequest: MaxShape is the fixed shape without quantiles,
// and with them no request Shape creates is longer (prompt or output).
func TestMaxShapeBoundsEveryRequest(t *testing.T) {
	fixed := Spec{ISL: 1024, OSL: 128}
	if i, o := fixed.MaxShape(); i != 1024 || o != 128 {
		t.Fatalf("fixed shape: MaxShape = (%d, %d), want (1024, 128)", i, o)
	}
	w := Spec{ISL: 900, OSL: 200, ISLQuantiles: []int{100, 800, 3000}, OSLQuantiles: []int{50, 400}}
	mi, mo := w.MaxShape()
	if mi != 3000 || mo != 400 {
		t.Fatalf("W2 shape: MaxShape = (%d, %d), want (3000, 400)", mi, mo)
	}
	for k := 0; k < 1000; k++ {
		if i, o := w.Shape(k); i > mi || o > mo {
			t.Fatalf("request %d: Shape = (%d, %d) exceeds MaxShape (%d, %d)", k, i, o, mi, mo)
		}
	}
}
