package trace

import (
	"math"
	"slices"
)

// Stats summarises a trace (or a slice of one): counts, arrival rate over time,
// length quantiles and the trace's own prefix reuse.
type Stats struct {
	Requests  int
	Sessions  int
	FirstMs   float64
	LastMs    float64
	BucketMs  float64
	Buckets   []int // requests per bucket, from FirstMs
	ISL, OSL  Quantiles
	HashBlock int
	// Reuse with an unbounded cache: prompt blocks (and their tokens) whose hash id —
	// and every id before it in the same prompt — appeared in an earlier request.
	// Requests without hash ids count in neither.
	ReusedBlocks, Blocks int64
	ReusedTokens, Tokens int64
}

// Quantiles of a length distribution (tokens).
type Quantiles struct {
	Mean                    float64
	Min, P50, P90, P99, Max int
}

// StatsBuilder accumulates Stats one request at a time (in arrival order).
type StatsBuilder struct {
	hashBlock int
	bucketMs  float64
	s         Stats
	isl, osl  []int32
	seen      map[int64]struct{}
	sessions  map[string]struct{}
}

// NewStatsBuilder starts a summary; bucketMs ≤ 0 picks a width giving ≤ 24 buckets
// over spanMs.
func NewStatsBuilder(hashBlock int, bucketMs, spanMs float64) *StatsBuilder {
	if bucketMs <= 0 {
		bucketMs = NiceBucketMs(spanMs, 24)
	}
	if hashBlock <= 0 {
		hashBlock = DefaultHashBlock
	}
	return &StatsBuilder{hashBlock: hashBlock, bucketMs: bucketMs, seen: map[int64]struct{}{}, sessions: map[string]struct{}{}}
}

// NiceBucketMs is the smallest of 1 s, 2 s, 5 s, 10 s, 30 s, 1, 2, 5, 10, 15, 30 min,
// 1, 2, 3, 6, 12, 24 h giving at most n buckets over spanMs.
func NiceBucketMs(spanMs float64, n int) float64 {
	for _, s := range []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
		if spanMs/(s*1000) < float64(n) {
			return s * 1000
		}
	}
	d := 86400e3
	return math.Ceil(spanMs/float64(n)/d) * d
}

// Add counts one request.
func (b *StatsBuilder) Add(r Request) {
	s := &b.s
	if s.Requests == 0 {
		s.FirstMs = r.ArrivalMs
	}
	s.Requests++
	s.LastMs = r.ArrivalMs
	k := int((r.ArrivalMs - s.FirstMs) / b.bucketMs)
	for len(s.Buckets) <= k {
		s.Buckets = append(s.Buckets, 0)
	}
	s.Buckets[k]++
	b.isl = append(b.isl, int32(r.ISL))
	b.osl = append(b.osl, int32(r.OSL))
	if r.Session != "" {
		b.sessions[r.Session] = struct{}{}
	}
	if r.HashIDs == nil {
		return
	}
	prefix := true
	for i, h := range r.HashIDs {
		tok := int64(min(b.hashBlock, r.ISL-i*b.hashBlock))
		_, seen := b.seen[h]
		prefix = prefix && seen
		s.Blocks++
		s.Tokens += tok
		if prefix {
			s.ReusedBlocks++
			s.ReusedTokens += tok
		}
	}
	for _, h := range r.HashIDs {
		b.seen[h] = struct{}{}
	}
}

// Stats returns the summary so far.
func (b *StatsBuilder) Stats() Stats {
	s := b.s
	s.BucketMs = b.bucketMs
	s.HashBlock = b.hashBlock
	s.Sessions = len(b.sessions)
	s.ISL = quantiles(b.isl)
	s.OSL = quantiles(b.osl)
	return s
}

// quantiles sorts a copy of v; nearest-rank quantiles.
func quantiles(v []int32) Quantiles {
	if len(v) == 0 {
		return Quantiles{}
	}
	w := slices.Clone(v)
	slices.Sort(w)
	sum := 0.0
	for _, x := range w {
		sum += float64(x)
	}
	q := func(p float64) int {
		i := int(math.Ceil(p*float64(len(w)))) - 1
		return int(w[max(0, min(i, len(w)-1))])
	}
	return Quantiles{Mean: sum / float64(len(w)), Min: int(w[0]), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: int(w[len(w)-1])}
}

// Fraction is num/den, 0 when den is 0 (never NaN).
func Fraction(num, den int64) float64 {
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}
