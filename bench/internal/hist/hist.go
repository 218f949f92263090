// Package hist is a log-linear latency histogram in the style of
// HdrHistogram: every power of two is split into 128 equal sub-buckets, so
// any recorded value is known to within 1/128 (0.8%) of itself, whatever its
// magnitude, in a fixed 58 KiB of counters and with O(1) recording.
//
// A Histogram is not safe for concurrent use: each load-generating worker
// owns one and the runner merges them at the end, which keeps the hot path
// free of locks and shared cache lines.
package hist

import (
	"math"
	"math/bits"
	"time"
)

const (
	subBits  = 7
	subCount = 1 << subBits // sub-buckets per power of two
	// Values below subCount get a bucket each; every larger power of two
	// (shift 0..56 for int64 values) gets subCount buckets.
	numBuckets = subCount + (64-subBits-1)*subCount
)

// Histogram counts non-negative durations.
type Histogram struct {
	counts   [numBuckets]uint64
	total    uint64
	min, max int64
	sum      float64 // for the mean; float so it cannot overflow
}

// New returns an empty histogram.
func New() *Histogram { return &Histogram{min: math.MaxInt64} }

func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	mantissa := int(v >> shift) // in [subCount, 2*subCount)
	return subCount + shift*subCount + (mantissa - subCount)
}

// bucketHigh is the largest value that falls in bucket b.
func bucketHigh(b int) int64 {
	if b < subCount {
		return int64(b)
	}
	shift := (b - subCount) / subCount
	mantissa := int64(b-subCount)%subCount + subCount
	return (mantissa+1)<<shift - 1
}

// Record adds one observation; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += float64(v)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.total }

// Max is the largest observation, exactly; zero when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Min is the smallest observation, exactly; zero when empty.
func (h *Histogram) Min() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.min)
}

// Mean is the arithmetic mean; zero when empty.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.total))
}

// Quantile returns the smallest value v such that at least q of the
// observations are <= v, reported (as HdrHistogram does) as the top of v's
// bucket but never above the true maximum. q is in [0, 1]; zero when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(max(bucketHigh(b), h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Summary is a histogram reduced to the figures reports show.
type Summary struct {
	Count uint64        `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
	// Curve holds the latency at each of CurveQuantiles, for percentile
	// charts.
	Curve []time.Duration `json:"curve_ns,omitempty"`
}

// CurveQuantiles are the points of a percentile curve: evenly spaced in
// "nines" (90%, 99%, 99.9%, ...) with a few points in between.
var CurveQuantiles = []float64{0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1}

// Summarize reduces h to a Summary.
func (h *Histogram) Summarize() Summary {
	s := Summary{
		Count: h.total,
		Mean:  h.Mean(),
		P50:   h.Quantile(0.50),
		P90:   h.Quantile(0.90),
		P99:   h.Quantile(0.99),
		P999:  h.Quantile(0.999),
		Max:   h.Max(),
	}
	if h.total > 0 {
		s.Curve = make([]time.Duration, len(CurveQuantiles))
		for i, q := range CurveQuantiles {
			s.Curve[i] = h.Quantile(q)
		}
	}
	return s
}
