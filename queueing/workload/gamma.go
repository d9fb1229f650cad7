package workload

import (
	"fmt"
	"math"
)

// Gamma-distributed send gaps: `vllm bench serve --burstiness b` draws each gap
// from a gamma distribution of shape b and mean 1/rate (b = 1 is the Poisson
// process; b < 1 burstier, b > 1 smoother), as does `aiperf profile
// --arrival-pattern gamma --arrival-smoothness b`. NewGammaArrivalStream is the
// W1 stream (ArrivalStream) with the strata of that distribution: each of the
// ArrivalStrata equal-probability strata takes its conditional mean, so a period
// has the exact mean and visits every stratum once.

// maxGammaShape bounds the shape a stream takes (a larger shape is nearly
// constant: use ConstantArrivalsMs).
const maxGammaShape = 1e4

// NewGammaArrivalStream returns the stream for rateRPS requests per second with
// gamma gaps of the given shape (at shape 1 its strata are NewArrivalStream's to
// rounding: callers take that stream for the Poisson process).
func NewGammaArrivalStream(rateRPS, shape float64) (*ArrivalStream, error) {
	if !(shape > 0) || shape > maxGammaShape || math.IsInf(shape, 0) {
		return nil, fmt.Errorf("gamma shape (burstiness) = %v: must be a number in (0, %g]", shape, maxGammaShape)
	}
	if !(rateRPS > 0) || math.IsInf(rateRPS, 0) {
		return nil, fmt.Errorf("request rate = %v: must be a finite number > 0 (requests per second)", rateRPS)
	}
	s := &ArrivalStream{}
	meanMs := 1000 / rateRPS
	// X ~ Gamma(a, 1), scaled by mean/a. With q_j the j/K quantile of X,
	// E[X; X ≤ x] = a·P(a+1, x), so the stratum mean is
	// K·a·(P(a+1, q_{j+1}) − P(a+1, q_j)) and the gaps' mean is exactly a.
	a := shape
	k := float64(ArrivalStrata)
	prevQ, prevP1 := 0.0, 0.0
	for j := 0; j < ArrivalStrata; j++ {
		p1 := 1.0
		q := math.Inf(1)
		if j+1 < ArrivalStrata {
			q = gammaQuantile(a, float64(j+1)/k, prevQ)
			p1 = regGammaP(a+1, q)
		}
		s.strata[j] = meanMs * (p1 - prevP1) * k // (mean/a)·K·a·ΔP(a+1)
		prevQ, prevP1 = q, p1
	}
	s.shuffle(0)
	return s, nil
}

// ConstantArrivalsMs returns n arrival times 1/rateRPS apart, the first at 0
// (AIPerf --arrival-pattern constant).
func ConstantArrivalsMs(n int, rateRPS float64) ([]float64, error) {
	if !(rateRPS > 0) || math.IsInf(rateRPS, 0) || n < 0 {
		return nil, fmt.Errorf("constant arrivals: %d requests at %v rps: want n ≥ 0 and a finite rate > 0", n, rateRPS)
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i) * 1000 / rateRPS
	}
	return out, nil
}

// regGammaP is the regularised lower incomplete gamma function P(a, x): the
// series for x < a + 1, the continued fraction (modified Lentz) beyond.
func regGammaP(a, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case math.IsInf(x, 1):
		return 1
	}
	lg, _ := math.Lgamma(a)
	lead := a*math.Log(x) - x - lg
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*1e-16 {
				break
			}
		}
		return math.Min(1, sum*math.Exp(lead))
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return math.Max(0, 1-math.Exp(lead)*h)
}

// gammaQuantile returns x with P(a, x) = u (0 < u < 1) to 1e-15 in P, searching
// above lo (a known lower bound: the previous stratum's quantile): Newton steps
// from where the density puts u, bisecting (or doubling, with no upper bound yet)
// whenever a step leaves the bracket. The strata's means telescope, so their sum
// is exact whatever the rounding, which only moves a stratum's edge.
func gammaQuantile(a, u, lo float64) float64 {
	lg, _ := math.Lgamma(a)
	hi := math.Inf(1)
	// Start where the density at lo (or, from 0, P ≈ x^a/Γ(a+1)) puts u.
	x := math.Exp((math.Log(u) + lg + math.Log(a)) / a)
	if lo > 0 {
		x = lo + (u-regGammaP(a, lo))/math.Exp((a-1)*math.Log(lo)-lo-lg)
	}
	if !(x > lo) || math.IsInf(x, 0) {
		x = 2*lo + 1e-9
	}
	for i := 0; i < 400; i++ {
		p := regGammaP(a, x)
		if math.Abs(p-u) <= 1e-15 {
			return x
		}
		if p < u {
			lo = x
		} else {
			hi = x
		}
		next := x - (p-u)/math.Exp((a-1)*math.Log(x)-x-lg)
		if !(next > lo && next < hi) { // outside the bracket (or NaN)
			next = 2 * x
			if !math.IsInf(hi, 1) {
				next = (lo + hi) / 2
			}
		}
		if !math.IsInf(hi, 1) && hi-lo <= 1e-15*hi {
			return next
		}
		x = next
	}
	return x
}
