package loadgen

import (
	"math"
	"sort"
	"time"
)

// Summary describes a sample: its size, median, nearest-rank percentiles,
// extremes and mean. Values are in the sample's unit (milliseconds for
// latencies).
type Summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Summarize computes the Summary of xs (the zero Summary when empty).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{N: len(s), Min: s[0], P50: Percentile(s, 0.5), P90: Percentile(s, 0.9), P99: Percentile(s, 0.99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// Percentile is the nearest-rank p-quantile (0 < p ≤ 1) of the sorted
// sample s: the smallest value with at least p of the sample at or below
// it. 0 for an empty sample.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// Interval is a span of time [Start, End].
type Interval struct{ Start, End time.Time }

// Covered is the time covered by at least one of the intervals: the
// model time on a run's critical path when the intervals are its LLM
// calls (calls that overlap count once).
func Covered(xs []Interval) time.Duration {
	s := append([]Interval(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
	var total time.Duration
	var cur Interval
	open := false
	for _, iv := range s {
		if !iv.End.After(iv.Start) {
			continue
		}
		switch {
		case !open:
			cur, open = iv, true
		case iv.Start.After(cur.End):
			total += cur.End.Sub(cur.Start)
			cur = iv
		case iv.End.After(cur.End):
			cur.End = iv.End
		}
	}
	if open {
		total += cur.End.Sub(cur.Start)
	}
	return total
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
