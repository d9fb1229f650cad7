package queueing

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestQuantileRule: the smallest value whose cumulative weight is ≥ q·W, with exact
// boundaries (a 1 % tail at q = 0.99 lands on the lower atom).
func TestQuantileRule(t *testing.T) {
	d, err := NewDistribution([]Atom{{5, 99}, {50, 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ q, want float64 }{{0, 5}, {0.5, 5}, {0.99, 5}, {0.9901, 50}, {0.999, 50}, {1, 50}} {
		if got := d.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	thirds, _ := NewDistribution([]Atom{{3, 1}, {1, 1}, {2, 1}, {2, 0}})
	for _, c := range []struct{ q, want float64 }{{1.0 / 3, 1}, {2.0 / 3, 2}, {0.67, 3}} {
		if got := thirds.Quantile(c.q); got != c.want {
			t.Errorf("thirds Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if thirds.Len() != 3 || thirds.Mean() != 2 || thirds.Min() != 1 || thirds.Max() != 3 {
		t.Errorf("thirds: len %d mean %v min %v max %v", thirds.Len(), thirds.Mean(), thirds.Min(), thirds.Max())
	}
	var empty Distribution
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 || empty.Max() != 0 {
		t.Error("empty distribution must report 0")
	}
	if _, err := NewDistribution([]Atom{{math.NaN(), 1}}); err == nil {
		t.Error("NaN atom accepted")
	}
	if _, err := NewDistribution([]Atom{{1, -1}}); err == nil {
		t.Error("negative weight accepted")
	}
}

// TestQuantileProperties: quantiles are monotone in q, lie on atoms within
// [Min, Max], and Shift moves every statistic by the shift.
func TestQuantileProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(rt, "n")
		atoms := make([]Atom, n)
		for i := range atoms {
			atoms[i] = Atom{Value: rapid.Float64Range(-1e3, 1e3).Draw(rt, "v"), Weight: rapid.Float64Range(0.001, 10).Draw(rt, "w")}
		}
		d, err := NewDistribution(atoms)
		if err != nil {
			rt.Fatal(err)
		}
		prev := math.Inf(-1)
		for _, q := range []float64{0, 0.1, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1} {
			v := d.Quantile(q)
			if v < prev || v < d.Min() || v > d.Max() {
				rt.Fatalf("Quantile(%v) = %v after %v (min %v max %v)", q, v, prev, d.Min(), d.Max())
			}
			prev = v
		}
		c := rapid.Float64Range(-100, 100).Draw(rt, "c")
		s := d.Shift(c)
		if math.Abs(s.Mean()-d.Mean()-c) > 1e-9*(1+math.Abs(d.Mean())) || s.Quantile(0.9) != d.Quantile(0.9)+c {
			rt.Fatalf("shift by %v: mean %v → %v, p90 %v → %v", c, d.Mean(), s.Mean(), d.Quantile(0.9), s.Quantile(0.9))
		}
	})
}
