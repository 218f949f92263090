package etcdapi_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/januskv/janus/internal/testenv"
)

var (
	watchFanBench = flag.Bool("etcdapi.watchfan-bench", false, "measure put latency under many watchers against Janus and a real etcd (slow; logs ratios)")
	watchFanPuts  = flag.Int("etcdapi.watchfan-puts", 100, "puts per scenario of the watch fan-out measurement")
)

// fanScenario is one shape of watchers a write has to pay for.
type fanScenario struct {
	name     string
	watchers int
	streams  int
	distinct bool // one key per watcher (the puts hit one of them) or all on one key
}

// TestWatchFanOutCost measures what a put costs with 0 to 10,000 watchers,
// on Janus and on etcd in the same run, and logs the ratios. It asserts
// only that every watcher received every event meant for it: timings on a
// shared machine are reported, never asserted.
func TestWatchFanOutCost(t *testing.T) {
	if !*watchFanBench {
		t.Skip("measurement; run with -etcdapi.watchfan-bench")
	}
	scenarios := []fanScenario{
		{"none", 0, 1, false},
		{"1k-one-key", 1000, 1, false},
		{"10k-one-key", 10000, 1, false},
		{"10k-distinct-100-streams", 10000, 100, true},
	}
	j := startJanus(t)
	e := testenv.StartEtcdProcess(t)
	for _, sc := range scenarios {
		jp := measureFanOut(t, j.Endpoint, sc, *watchFanPuts)
		ep := measureFanOut(t, e.Endpoints[0], sc, *watchFanPuts)
		t.Logf("%-26s janus p50 %7.2fms p99 %7.2fms | etcd p50 %7.2fms p99 %7.2fms | janus/etcd p50 %.2fx p99 %.2fx",
			sc.name, ms(jp[0]), ms(jp[1]), ms(ep[0]), ms(ep[1]), ratio(jp[0], ep[0]), ratio(jp[1], ep[1]))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// measureFanOut opens the scenario's watchers on endpoint, times puts one
// after another on a separate connection, waits until every watcher has
// every event, and returns the p50 and p99 put latency.
func measureFanOut(t *testing.T, endpoint string, sc fanScenario, puts int) [2]time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("fan/%s/%d/", sc.name, time.Now().UnixNano())
	watchCli := newClient(t, endpoint)
	defer watchCli.Close()
	putCli := newClient(t, endpoint)
	defer putCli.Close()

	key := func(i int) string {
		if sc.distinct {
			return fmt.Sprintf("%s%06d", prefix, i)
		}
		return prefix + "hot"
	}
	var received atomic.Int64
	var wg sync.WaitGroup
	wctx, wcancel := context.WithCancel(ctx)
	defer func() { wcancel(); wg.Wait() }()
	for i := range sc.watchers {
		sctx := metadata.AppendToOutgoingContext(wctx, "fan-stream", fmt.Sprint(i%sc.streams))
		ch := watchCli.Watch(sctx, key(i), clientv3.WithCreatedNotify())
		if resp := <-ch; !resp.Created {
			t.Fatalf("%s: watcher %d not created: %v", sc.name, i, resp.Err())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for resp := range ch {
				received.Add(int64(len(resp.Events)))
			}
		}()
	}
	lat := make([]time.Duration, 0, puts)
	for i := range puts {
		start := time.Now()
		if _, err := putCli.Put(ctx, key(i%max(sc.watchers, 1)), "v"); err != nil {
			t.Fatalf("%s: put: %v", sc.name, err)
		}
		lat = append(lat, time.Since(start))
	}
	want := int64(puts) * int64(sc.watchers)
	if sc.distinct {
		want = int64(puts)
	}
	for received.Load() < want {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d events delivered", sc.name, received.Load(), want)
		case <-time.After(10 * time.Millisecond):
		}
	}
	slices.Sort(lat)
	return [2]time.Duration{lat[len(lat)/2], lat[(len(lat)*99)/100]}
}
