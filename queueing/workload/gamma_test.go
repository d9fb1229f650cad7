package workload

import (
	"math"
	"testing"
	"testing/quick"
)

// TestGammaStrata: the gamma stream's strata have the exact mean, the gamma
// variance mean²/shape (to the strata's within-stratum loss, < 2 % at 4,096
// strata), increase with the stratum, and at shape 1 are the Poisson stream's
// (to 1e-9).
func TestGammaStrata(t *testing.T) {
	exp, err := NewArrivalStream(4)
	if err != nil {
		t.Fatal(err)
	}
	g1, err := NewGammaArrivalStream(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	for j := range exp.strata {
		if d := math.Abs(g1.strata[j] - exp.strata[j]); d > 1e-9*exp.strata[j] {
			t.Fatalf("shape 1 stratum %d: %v, Poisson stream %v", j, g1.strata[j], exp.strata[j])
		}
	}
	for _, a := range []float64{0.25, 0.5, 2, 8, 100} {
		s, err := NewGammaArrivalStream(4, a)
		if err != nil {
			t.Fatal(err)
		}
		var m, m2 float64
		for j, v := range s.strata {
			if j > 0 && !(v > s.strata[j-1]) {
				t.Fatalf("shape %v: stratum %d = %v not above %v", a, j, v, s.strata[j-1])
			}
			m += v / ArrivalStrata
			m2 += v * v / ArrivalStrata
		}
		if math.Abs(m-250) > 1e-9*250 {
			t.Errorf("shape %v: mean gap %v ms, want 250", a, m)
		}
		want := 250 * 250 / a
		if v := m2 - m*m; !(v <= want*(1+1e-9) && v > want*0.98) {
			t.Errorf("shape %v: gap variance %v, want just below %v", a, v, want)
		}
	}
}

// TestRegGammaP: P(a, x) against closed forms (a = 1: 1 − e^−x; a = ½:
// erf(√x)) and its monotonicity and range on random arguments.
func TestRegGammaP(t *testing.T) {
	for _, x := range []float64{1e-6, 0.01, 0.5, 1, 2, 5, 30} {
		if d := math.Abs(regGammaP(1, x) + math.Expm1(-x)); d > 1e-13 {
			t.Errorf("P(1, %v) off by %v", x, d)
		}
		if d := math.Abs(regGammaP(0.5, x) - math.Erf(math.Sqrt(x))); d > 1e-13 {
			t.Errorf("P(½, %v) off by %v", x, d)
		}
	}
	f := func(a8, x8, y8 uint16) bool {
		a := 0.05 + float64(a8)/100
		x, y := float64(x8)/500, float64(y8)/500
		if x > y {
			x, y = y, x
		}
		p, q := regGammaP(a, x), regGammaP(a, y)
		return p >= 0 && q <= 1 && p <= q
	}
	if err := quick.Check(f, nil); err != nil {
		t.Error(err)
	}
}

// TestConstantAndGammaPaths: constant arrivals are 1/rate apart from 0; gamma
// paths start at 0, never decrease, and refuse bad shapes in one line.
func TestConstantAndGammaPaths(t *testing.T) {
	c, err := ConstantArrivalsMs(4, 8)
	if err != nil || c[0] != 0 || c[3] != 375 {
		t.Errorf("constant arrivals %v, %v", c, err)
	}
	gs, err := ArrivalPaths(500, 3, 0.5, 2, 2)
	if err != nil || len(gs) != 2 || gs[0][0] != 0 {
		t.Fatalf("gamma paths: %v", err)
	}
	g := gs[0]
	if one, _ := ArrivalPaths(500, 3, 0.5, 3, 1); one[0][499] != gs[1][499] {
		t.Errorf("path 3 alone differs from path 3 of a pair")
	}
	if p0, _ := ArrivalPaths(10, 3, 1, 0, 1); p0[0][9] != mustTimes(t, 10, 3)[9] {
		t.Errorf("Poisson path 0 is not the stream's first arrivals")
	}
	for i := 1; i < len(g); i++ {
		if g[i] < g[i-1] {
			t.Fatalf("gamma path decreases at %d", i)
		}
	}
	for _, a := range []float64{0, -1, math.NaN(), math.Inf(1), 2e4} {
		if _, err := NewGammaArrivalStream(3, a); err == nil {
			t.Errorf("shape %v accepted", a)
		}
	}
}

// BenchmarkGammaStream: building a gamma stream's 4,096 strata (once per open
// run's evaluation with gamma sends).
func BenchmarkGammaStream(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewGammaArrivalStream(3, 0.5); err != nil {
			b.Fatal(err)
		}
	}
}

func mustTimes(t *testing.T, n int, rate float64) []float64 {
	t.Helper()
	x, err := ArrivalTimesMs(n, rate)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
