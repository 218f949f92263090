package zab

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkPropose measures the pipeline (log write, fdatasync, apply) with
// 1, 16 and 256 concurrent proposers of 128-byte payloads and a state
// machine that does nothing, so group commit is what it shows.
func BenchmarkPropose(b *testing.B) {
	for _, proposers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			m, err := Open(Config{Dir: b.TempDir()}, indexSM{})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			payload := make([]byte, 128)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range proposers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := m.Propose(context.Background(), payload); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
		})
	}
}
