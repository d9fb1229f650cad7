package queueing

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Atom is one value of a Distribution with its (unnormalised, > 0) weight.
type Atom struct {
	Value  float64 `json:"value"`
	Weight float64 `json:"weight"`
}

// Distribution is a discrete distribution of weighted atoms, sorted by value with
// equal values merged. Its one quantile rule, used everywhere in aicdb: Quantile(q)
// is the smallest atom value x whose cumulative weight is ≥ q·W (W = total weight),
// up to a relative rounding tolerance of 1e-12·W. The zero Distribution is empty;
// its statistics are 0.
type Distribution struct {
	atoms []Atom
	cum   []float64 // cum[i] = Σ_{j ≤ i} atoms[j].Weight
}

// NewDistribution builds a Distribution from atoms (any order). Atoms with weight
// 0 are dropped; a negative or non-finite value or weight is an error.
func NewDistribution(atoms []Atom) (Distribution, error) {
	a := make([]Atom, 0, len(atoms))
	for _, x := range atoms {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) || math.IsNaN(x.Weight) || math.IsInf(x.Weight, 0) || x.Weight < 0 {
			return Distribution{}, fmt.Errorf("distribution atom (%v, weight %v): values and weights must be finite and weights ≥ 0", x.Value, x.Weight)
		}
		if x.Weight > 0 {
			a = append(a, x)
		}
	}
	return fromAtomsOwned(a), nil
}

// fromAtomsOwned sorts, merges and indexes a (which it takes ownership of). The
// caller guarantees finite values and positive weights.
func fromAtomsOwned(a []Atom) Distribution {
	sorted := true
	for i := 1; i < len(a); i++ {
		if a[i].Value < a[i-1].Value {
			sorted = false
			break
		}
	}
	if !sorted {
		// Values are finite, so < and > order them as cmp.Compare does (it only adds
		// the NaN cases): the same comparisons, the same order.
		slices.SortFunc(a, func(x, y Atom) int {
			if x.Value < y.Value {
				return -1
			}
			if x.Value > y.Value {
				return 1
			}
			return 0
		})
	}
	n := 0
	for i := range a {
		if n > 0 && a[n-1].Value == a[i].Value {
			a[n-1].Weight += a[i].Weight
			continue
		}
		a[n] = a[i]
		n++
	}
	a = a[:n]
	cum := make([]float64, n)
	s := 0.0
	for i := range a {
		s += a[i].Weight
		cum[i] = s
	}
	return Distribution{atoms: a, cum: cum}
}

// PointMass returns the distribution with all its weight on v.
func PointMass(v float64) Distribution {
	// One allocation for atoms and cumulative weights (screening builds several).
	s := new(struct {
		a [1]Atom
		c [1]float64
	})
	s.a[0], s.c[0] = Atom{Value: v, Weight: 1}, 1
	return Distribution{atoms: s.a[:], cum: s.c[:]}
}

// Len returns the number of distinct atoms.
func (d Distribution) Len() int { return len(d.atoms) }

// Atoms returns a copy of the atoms in increasing value order.
func (d Distribution) Atoms() []Atom { return append([]Atom(nil), d.atoms...) }

// TotalWeight returns Σ weights.
func (d Distribution) TotalWeight() float64 {
	if len(d.cum) == 0 {
		return 0
	}
	return d.cum[len(d.cum)-1]
}

// Quantile returns the smallest atom value whose cumulative weight is ≥ q·W.
// q is clamped to [0, 1]; Quantile(0) is the minimum. An empty distribution gives 0.
func (d Distribution) Quantile(q float64) float64 {
	n := len(d.atoms)
	if n == 0 {
		return 0
	}
	if !(q > 0) { // also catches NaN
		return d.atoms[0].Value
	}
	if q >= 1 {
		return d.atoms[n-1].Value
	}
	w := d.cum[n-1]
	target := q*w - 1e-12*w
	i := sort.SearchFloat64s(d.cum, target)
	if i >= n {
		i = n - 1
	}
	return d.atoms[i].Value
}

// Mean returns the weighted mean (0 when empty).
func (d Distribution) Mean() float64 {
	if len(d.atoms) == 0 {
		return 0
	}
	s := 0.0
	for _, a := range d.atoms {
		s += a.Value * a.Weight
	}
	return s / d.cum[len(d.cum)-1]
}

// Min returns the smallest value (0 when empty).
func (d Distribution) Min() float64 {
	if len(d.atoms) == 0 {
		return 0
	}
	return d.atoms[0].Value
}

// Max returns the largest value (0 when empty).
func (d Distribution) Max() float64 {
	if len(d.atoms) == 0 {
		return 0
	}
	return d.atoms[len(d.atoms)-1].Value
}

// Shift returns d with every value increased by c.
func (d Distribution) Shift(c float64) Distribution {
	if c == 0 || len(d.atoms) == 0 {
		return d
	}
	a := make([]Atom, len(d.atoms))
	for i, x := range d.atoms {
		a[i] = Atom{Value: x.Value + c, Weight: x.Weight}
	}
	return Distribution{atoms: a, cum: d.cum}
}

// MarshalJSON encodes the atoms.
func (d Distribution) MarshalJSON() ([]byte, error) {
	return jsonMarshal(d.atoms)
}
