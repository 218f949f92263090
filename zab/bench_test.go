package zab

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
			proposeFrom(b, []*Member{m}, proposers)
		})
	}
}

// BenchmarkWALAppend measures the log alone: one append of a group of 1 or
// 16 records with 128-byte payloads per op, each with its fdatasync, into
// segments of the default size. It isolates the cost of the sync, which is
// what the segment files' layout on disk changes.
func BenchmarkWALAppend(b *testing.B) {
	for _, group := range []int{1, 16} {
		b.Run(fmt.Sprintf("group=%d", group), func(b *testing.B) {
			w, err := openWAL(osFS{}, b.TempDir(), slog.New(slog.DiscardHandler), defaultSegmentSize)
			if err != nil {
				b.Fatal(err)
			}
			if err := w.reset(1); err != nil {
				b.Fatal(err)
			}
			defer w.close()
			payload := make([]byte, 128)
			entries := make([]Entry, group)
			next := uint64(1)
			b.ResetTimer()
			for range b.N {
				for i := range entries {
					entries[i] = Entry{Index: next, Zxid: MakeZxid(1, uint32(next)), Data: payload}
					next++
				}
				if err := w.append(entries); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplicatedPropose measures a 3-member ensemble with 1, 16 and
// 256 concurrent proposers of 128-byte payloads, spread over the members
// (so two thirds are forwarded to the leader, as with clients connected to
// every server), over the in-memory and the TCP transport. Each proposal
// is answered after a quorum has it on disk and its origin has applied it,
// so the figure is the whole replicated write path with the default tick.
func BenchmarkReplicatedPropose(b *testing.B) {
	for _, transport := range []string{"mem", "tcp"} {
		for _, proposers := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("transport=%s/proposers=%d", transport, proposers), func(b *testing.B) {
				proposeFrom(b, openBenchEnsemble(b, transport), proposers)
			})
		}
	}
}

// openBenchEnsemble starts three members with the default timeouts and
// returns once every one of them has applied a first write.
func openBenchEnsemble(b *testing.B, transport string) []*Member {
	b.Helper()
	peers := map[uint64]string{}
	var net *MemNetwork
	for id := uint64(1); id <= 3; id++ {
		if transport == "tcp" {
			peers[id] = listenAddr(b)
		} else {
			peers[id] = fmt.Sprintf("mem-%d", id)
		}
	}
	if transport == "mem" {
		net = NewMemNetwork(1)
	}
	var ms []*Member
	for id := uint64(1); id <= 3; id++ {
		cfg := Config{Dir: b.TempDir(), ID: id, Peers: peers}
		if net != nil {
			cfg.Transport = net.Endpoint(id)
		}
		m, err := Open(cfg, indexSM{})
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	b.Cleanup(func() {
		for _, m := range ms {
			m.Close()
		}
		if net != nil {
			net.Wait()
		}
	})
	for _, m := range ms {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := m.Propose(ctx, []byte("warm up"))
			cancel()
			if err == nil {
				break
			}
			if !retryable(err) {
				b.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return ms
}

// proposeFrom times b.N proposals of 128 bytes made by proposers
// goroutines, spread over ms in turn, and reports proposals per second.
func proposeFrom(b *testing.B, ms []*Member, proposers int) {
	payload := make([]byte, 128)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range proposers {
		m := ms[i%len(ms)]
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
}
