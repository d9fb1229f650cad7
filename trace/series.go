package trace

import (
	"fmt"
	"math"
	"slices"
)

// Outcome is one replayed request as the time series needs it (ms from the trace
// origin): its arrival, first token and finish.
type Outcome struct {
	ArrivalMs, FirstTokenMs, FinishMs float64
}

// Window is one bucket of a replay's time series (`aicdb trace replay --by`).
type Window struct {
	StartS   float64 `json:"start_s"`
	Arrivals int     `json:"arrivals"` // requests arriving in the window
	Finished int     `json:"finished"` // requests finishing in the window
	// ThroughputRPS is Finished / window length.
	ThroughputRPS float64 `json:"throughput_rps"`
	// QueueLen is the time-average number of requests that had arrived but not yet
	// received their first token (waiting or prefilling) over the window.
	QueueLen float64 `json:"queue_len"`
	// InSystem is the time-average number of requests between arrival and finish.
	InSystem float64 `json:"in_system"`
	// TTFTP99Ms is the nearest-rank p99 TTFT of the requests arriving in the window
	// (nil — null in JSON — when none arrived: there is no TTFT to report).
	TTFTP99Ms *float64 `json:"ttft_p99_ms"`
}

// ByWidth maps a --by name to its window width in ms.
func ByWidth(by string) (float64, error) {
	switch by {
	case "second":
		return 1000, nil
	case "minute":
		return 60e3, nil
	case "hour":
		return 3600e3, nil
	}
	return 0, fmt.Errorf("--by %q: must be second, minute or hour", by)
}

// Series buckets outcomes into windows of widthMs from the first arrival to the last
// finish. Windows are [start, start + width); the last may be partial and its rates
// use its true length. Deterministic; never NaN.
func Series(out []Outcome, widthMs float64) []Window {
	if len(out) == 0 || !(widthMs > 0) {
		return nil
	}
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, o := range out {
		t0, t1 = math.Min(t0, o.ArrivalMs), math.Max(t1, o.FinishMs)
	}
	t0 = math.Floor(t0/widthMs) * widthMs
	n := max(1, int(math.Ceil((t1-t0)/widthMs)))
	ws := make([]Window, n)
	ttft := make([][]float64, n)
	idx := func(t float64) int { return min(n-1, max(0, int((t-t0)/widthMs))) }
	// area adds the overlap of [a, b) with every window to field f (ms·requests).
	area := func(a, b float64, f func(*Window) *float64) {
		for k := idx(a); k < n && a < b; k++ {
			end := t0 + float64(k+1)*widthMs
			*f(&ws[k]) += math.Min(b, end) - a
			a = end
		}
	}
	for _, o := range out {
		k := idx(o.ArrivalMs)
		ws[k].Arrivals++
		ttft[k] = append(ttft[k], o.FirstTokenMs-o.ArrivalMs)
		ws[idx(o.FinishMs)].Finished++
		area(o.ArrivalMs, o.FirstTokenMs, func(w *Window) *float64 { return &w.QueueLen })
		area(o.ArrivalMs, o.FinishMs, func(w *Window) *float64 { return &w.InSystem })
	}
	for k := range ws {
		w := &ws[k]
		w.StartS = (t0 + float64(k)*widthMs) / 1000
		length := widthMs
		if k == n-1 {
			length = math.Max(t1-(t0+float64(k)*widthMs), 1e-9)
		}
		w.ThroughputRPS = float64(w.Finished) / length * 1000
		w.QueueLen /= length
		w.InSystem /= length
		if v := ttft[k]; len(v) > 0 {
			slices.Sort(v)
			p99 := v[max(0, int(math.Ceil(0.99*float64(len(v))))-1)]
			w.TTFTP99Ms = &p99
		}
	}
	return ws
}
