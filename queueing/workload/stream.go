package workload

import (
	"fmt"
	"math"
)

// ArrivalStrata is the number of inter-arrival strata of the open-loop stream. A
// period visits every stratum once, so the arrival count over a window of m gaps
// has the variance of sampling without replacement, m·σ²·(K−m)/(K−1): with K = 256
// a ρ = 0.8 M/D/1 queue (busy periods of ~100 arrivals) waits 11 % less than
// under Poisson arrivals; K = 4096 brings that to 2 % (identities_test.go) while
// the per-pair correlation −1/(K−1) is negligible.
const ArrivalStrata = 4096

// ArrivalStream is the deterministic, correlation-free, Poisson-equivalent
// open-loop arrival stream of fidelity tier W1 (QUEUEING.md §2).
//
// Inter-arrival gaps take the ArrivalStrata values m_j = E[X | X in stratum j] of an
// exponential variable of mean 1/rate cut into equal-probability strata
// (j = 0..K−1), so the mean is exactly 1/rate. Period p (gaps pK .. pK+K−1) visits
// every stratum once, in the order of a Fisher–Yates shuffle driven by splitmix64
// seeded with a pure function of p: bit-reproducible, no runtime randomness, and —
// unlike a golden-ratio stride, which anti-correlates consecutive gaps and starves
// queueing tails — free of serial correlation across the period.
//
// Request 0 arrives at 0 ms; request i at the sum of the first i gaps.
type ArrivalStream struct {
	strata [ArrivalStrata]float64 // gap values in ms, by stratum
	perm   [ArrivalStrata]uint16  // current period's order (K ≤ 65536)
	period int
	i      int     // index of the next gap within the period
	t      float64 // arrival time of the next request
}

// NewArrivalStream returns the stream for rateRPS requests per second.
func NewArrivalStream(rateRPS float64) (*ArrivalStream, error) {
	if !(rateRPS > 0) || math.IsInf(rateRPS, 0) {
		return nil, fmt.Errorf("request rate = %v: must be a finite number > 0 (requests per second)", rateRPS)
	}
	s := &ArrivalStream{}
	meanMs := 1000 / rateRPS
	// ∫_a^b −ln(1−u) du = F(b) − F(a) with F(u) = (1−u)·ln(1−u) + u, F(1) = 1.
	F := func(u float64) float64 {
		if u >= 1 {
			return 1
		}
		return (1-u)*math.Log1p(-u) + u
	}
	k := float64(ArrivalStrata)
	for j := 0; j < ArrivalStrata; j++ {
		a, b := float64(j)/k, float64(j+1)/k
		s.strata[j] = meanMs * (F(b) - F(a)) * k
	}
	s.shuffle(0)
	return s, nil
}

// shuffle sets perm to the order of period p.
func (s *ArrivalStream) shuffle(p int) {
	for j := range s.perm {
		s.perm[j] = uint16(j)
	}
	x := uint64(p)*0x9E3779B97F4A7C15 + 0xD1B54A32D192ED03
	for j := ArrivalStrata - 1; j > 0; j-- {
		x = SplitMix64(&x)
		r := int(x % uint64(j+1))
		s.perm[j], s.perm[r] = s.perm[r], s.perm[j]
	}
	s.period = p
	s.i = 0
}

// SplitMix64 advances a splitmix64 state by its increment (2^64 / φ) and
// returns the next output, Mix64 of the new state: the generator behind the
// arrival strata's shuffles and the stagger phases' client offsets.
func SplitMix64(state *uint64) uint64 {
	*state += 0x9E3779B97F4A7C15
	return Mix64(*state)
}

// Mix64 is splitmix64's output function, a bijective 64-bit mix (also what
// hashes a seed into a stream's starting state).
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Next returns the arrival time (ms) of the next request.
func (s *ArrivalStream) Next() float64 {
	t := s.t
	if s.i == ArrivalStrata {
		s.shuffle(s.period + 1)
	}
	s.t += s.strata[s.perm[s.i]]
	s.i++
	return t
}

// ArrivalPaths returns k independent paths (first, first+1, …) of n arrival
// times each (ms, the first at 0) of the stream for rateRPS with gamma gaps of
// the given shape (0 or 1: the Poisson stream, NewArrivalStream; else
// NewGammaArrivalStream), the strata built once. Path p draws its gaps from the
// stream's periods p·⌈n/ArrivalStrata⌉ onwards, so the paths of one n share no
// period (their gaps are independent draws of the same strata) and path 0 is
// the stream's first n arrivals.
func ArrivalPaths(n int, rateRPS, shape float64, first, k int) ([][]float64, error) {
	if first < 0 || n < 0 || k < 0 {
		return nil, fmt.Errorf("arrival paths %d… (%d of them) of %d requests: want first, k and n ≥ 0", first, k, n)
	}
	var s *ArrivalStream
	var err error
	if shape == 0 || shape == 1 {
		s, err = NewArrivalStream(rateRPS)
	} else {
		s, err = NewGammaArrivalStream(rateRPS, shape)
	}
	if err != nil {
		return nil, err
	}
	out := make([][]float64, k)
	for i := range out {
		c := *s // a fresh stream for each path
		out[i] = c.path(n, first+i)
	}
	return out, nil
}

// path returns n arrival times of path p of a fresh stream s (ArrivalPaths).
func (s *ArrivalStream) path(n, p int) []float64 {
	if p > 0 {
		s.shuffle(p * ((n + ArrivalStrata - 1) / ArrivalStrata))
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = s.Next()
	}
	return out
}

// ArrivalTimesMs returns the first n arrival times of the stream for rateRPS.
func ArrivalTimesMs(n int, rateRPS float64) ([]float64, error) {
	s, err := NewArrivalStream(rateRPS)
	if err != nil {
		return nil, err
	}
	return s.path(n, 0), nil
}

// The W2 shape rotation: request k takes the ISL stratum ⌊frac(½ + k·α₁)·n⌋ and the
// OSL stratum ⌊frac(½ + k·α₂)·m⌋ of the equally weighted quantile points, with
// (α₁, α₂) = (1/g, 1/g²), g the plastic number — the two-dimensional golden-ratio
// (R2) sequence, so the two marginals are covered evenly and independently (a
// single golden stride for both would make them comonotone).
const (
	shapeAlpha1 = 0.7548776662466927 // 1/g
	shapeAlpha2 = 0.5698402909980532 // 1/g²
)

// Shape returns the (isl, osl) of the k-th request (k = 0, 1, … in creation order)
// of w: the fixed ISL/OSL when no quantiles are given, else the W2 rotation above.
func (w *Spec) Shape(k int) (isl, osl int) {
	isl, osl = w.ISL, w.OSL
	if n := len(w.ISLQuantiles); n > 0 {
		isl = w.ISLQuantiles[rotate(k, shapeAlpha1, n)]
	}
	if m := len(w.OSLQuantiles); m > 0 {
		osl = w.OSLQuantiles[rotate(k, shapeAlpha2, m)]
	}
	return isl, osl
}

// MaxShape returns the longest prompt and output of w's requests: the larger of
// ISL/OSL and every quantile point (a bound for context-length checks and work
// guards; ISL is the mean when quantiles are given, never above their maximum in
// a well-formed W2 workload, but a bound must not assume that).
func (w *Spec) MaxShape() (isl, osl int) {
	isl, osl = w.ISL, w.OSL
	for _, v := range w.ISLQuantiles {
		isl = max(isl, v)
	}
	for _, v := range w.OSLQuantiles {
		osl = max(osl, v)
	}
	return isl, osl
}

func rotate(k int, alpha float64, n int) int {
	x := 0.5 + float64(k)*alpha
	x -= math.Floor(x)
	j := int(x * float64(n))
	if j >= n {
		j = n - 1
	}
	return j
}

// Fidelity returns the fidelity tier w consumes: W2 with shape quantiles, else W1
// for an open loop, else W0.
func (w *Spec) Fidelity() Tier {
	switch {
	case len(w.ISLQuantiles) > 0 || len(w.OSLQuantiles) > 0:
		return W2
	case w.RateRPS > 0:
		return W1
	}
	return W0
}
