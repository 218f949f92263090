package hist

import (
	"math/rand/v2"
	"testing"
	"time"
)

// within reports whether got is within the histogram's relative error of
// want.
func within(got, want time.Duration) bool {
	tol := want / subCount
	return got >= want-tol && got <= want+tol
}

func TestQuantilesOnKnownData(t *testing.T) {
	tests := []struct {
		name   string
		values func() []time.Duration
		q      float64
		want   time.Duration
	}{
		{"uniform 1..10000us p50", seq(10000, time.Microsecond), 0.50, 5000 * time.Microsecond},
		{"uniform 1..10000us p90", seq(10000, time.Microsecond), 0.90, 9000 * time.Microsecond},
		{"uniform 1..10000us p99", seq(10000, time.Microsecond), 0.99, 9900 * time.Microsecond},
		{"uniform 1..10000us p99.9", seq(10000, time.Microsecond), 0.999, 9990 * time.Microsecond},
		{"uniform 1..10000us max", seq(10000, time.Microsecond), 1, 10000 * time.Microsecond},
		{"uniform 1..10000us min", seq(10000, time.Microsecond), 0, 1 * time.Microsecond},
		{"small exact values p50", seq(100, 1), 0.5, 50},
		{"one outlier is the max", outlier, 1, time.Minute},
		{"one outlier is not p99", outlier, 0.99, time.Millisecond},
		{"single value", func() []time.Duration { return []time.Duration{42 * time.Millisecond} }, 0.5, 42 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New()
			vals := tt.values()
			rand.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
			for _, v := range vals {
				h.Record(v)
			}
			if got := h.Quantile(tt.q); !within(got, tt.want) {
				t.Errorf("Quantile(%v) = %v, want %v within 1/%d", tt.q, got, tt.want, subCount)
			}
		})
	}
}

func seq(n int, unit time.Duration) func() []time.Duration {
	return func() []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * unit
		}
		return out
	}
}

func outlier() []time.Duration {
	out := make([]time.Duration, 1000)
	for i := range out {
		out[i] = time.Millisecond
	}
	out[0] = time.Minute
	return out
}

func TestMergeEqualsRecordingIntoOne(t *testing.T) {
	a, b, all := New(), New(), New()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		v := time.Duration(r.ExpFloat64() * float64(time.Millisecond))
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	a.Merge(New()) // merging an empty histogram changes nothing
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		if got, want := a.Quantile(q), all.Quantile(q); got != want {
			t.Errorf("merged Quantile(%v) = %v, single = %v", q, got, want)
		}
	}
	if a.Count() != all.Count() || a.Min() != all.Min() || a.Max() != all.Max() {
		t.Errorf("merged count/min/max = %d/%v/%v, single = %d/%v/%v",
			a.Count(), a.Min(), a.Max(), all.Count(), all.Min(), all.Max())
	}
}

func TestEmptyAndExtremes(t *testing.T) {
	h := New()
	if s := h.Summarize(); s.Count != 0 || s.P99 != 0 || s.Max != 0 || s.Curve != nil {
		t.Errorf("empty summary = %+v, want zeros", s)
	}
	h.Record(-5)                       // clamped to zero
	h.Record(time.Duration(1<<63 - 1)) // the largest int64 has a bucket
	if got := h.Quantile(1); got != time.Duration(1<<63-1) {
		t.Errorf("max = %v", got)
	}
	if got := h.Quantile(0); got != 0 {
		t.Errorf("min = %v, want 0", got)
	}
}

func TestBucketsCoverEveryValueInOrder(t *testing.T) {
	// Each bucket's top must be at least every value mapped to it, and
	// buckets must be monotonic, or quantiles would come out of order.
	prev := -1
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 20, 1<<20 + 1, 1<<40 - 1, 1<<62 + 12345} {
		b := bucketOf(v)
		if b < prev {
			t.Fatalf("bucketOf(%d) = %d, below previous %d", v, b, prev)
		}
		if hi := bucketHigh(b); hi < v || (v >= subCount && float64(hi-v) > float64(v)/subCount) {
			t.Fatalf("bucketHigh(bucketOf(%d)) = %d: outside 1/%d", v, hi, subCount)
		}
		prev = b
	}
}
