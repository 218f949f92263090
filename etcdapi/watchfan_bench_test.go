package etcdapi_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/testenv"
)

var (
	watchFanBench  = flag.Bool("etcdapi.watchfan-bench", false, "measure put latency under many watchers against Janus and a real etcd (slow; logs ratios)")
	watchFanPuts   = flag.Int("etcdapi.watchfan-puts", 300, "puts per scenario and round of the watch fan-out measurement")
	watchFanRounds = flag.Int("etcdapi.watchfan-rounds", 1, "interleaved rounds of the watch fan-out measurement (medians are reported)")
	watchFanOnly   = flag.String("etcdapi.watchfan-only", "", "run only the fan-out scenarios whose names contain this")
)

// fanScenario is one shape of watchers a write has to pay for.
type fanScenario struct {
	name     string
	watchers int
	streams  int
	distinct bool // one key per watcher (the puts hit one of them) or all on one key
}

// fanResult is one scenario measured once on one server.
type fanResult struct {
	p50, p99 time.Duration
	cpu      time.Duration // client and server CPU per put, events delivered included
	events   int64         // events counted at the watchers
	resps    int64         // responses that carried them
}

// TestWatchFanOutCost measures what a put costs with up to 100,000
// watchers, on Janus and on etcd in the same run (interleaved rounds),
// and logs the ratios. It asserts only that every watcher received every
// event meant for it: timings on a shared machine are reported, never
// asserted. CPU per put is the CPU time of this process (the clients, and
// Janus when it serves) plus that of the etcd process, over the puts and
// the deliveries they cause, so the two servers carry the same client
// work.
func TestWatchFanOutCost(t *testing.T) {
	if !*watchFanBench {
		t.Skip("measurement; run with -etcdapi.watchfan-bench")
	}
	scenarios := []fanScenario{
		{"none", 0, 1, false},
		{"10k-one-key", 10000, 1, false},
		{"10k-distinct-1000-streams", 10000, 1000, true},
		{"100k-distinct-1000-streams", 100000, 1000, true},
	}
	j := startJanus(t)
	e := testenv.StartEtcdProcess(t)
	etcdPID := childPID(t, "etcd")
	for _, sc := range scenarios {
		if !strings.Contains(sc.name, *watchFanOnly) {
			continue
		}
		var jr, er []fanResult
		for range *watchFanRounds {
			jr = append(jr, measureFanOut(t, j.Endpoint, etcdPID, sc, *watchFanPuts))
			er = append(er, measureFanOut(t, e.Endpoints[0], etcdPID, sc, *watchFanPuts))
		}
		jm, em := medianFan(jr), medianFan(er)
		t.Logf("%-27s janus p50 %7.2fms p99 %7.2fms cpu/put %6.2fms | etcd p50 %7.2fms p99 %7.2fms cpu/put %6.2fms | janus/etcd p50 %.2fx p99 %.2fx cpu %.2fx | events %d, in %d responses from janus, %d from etcd",
			sc.name, ms(jm.p50), ms(jm.p99), ms(jm.cpu), ms(em.p50), ms(em.p99), ms(em.cpu),
			ratio(jm.p50, em.p50), ratio(jm.p99, em.p99), ratio(jm.cpu, em.cpu), jm.events, jm.resps, em.resps)
		for i := range jr {
			t.Logf("%-27s round %d: janus p99 %7.2fms etcd p99 %7.2fms (%.2fx)", sc.name, i+1, ms(jr[i].p99), ms(er[i].p99), ratio(jr[i].p99, er[i].p99))
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// medianFan is the median of each figure over rounds.
func medianFan(rs []fanResult) fanResult {
	med := func(f func(fanResult) time.Duration) time.Duration {
		var ds []time.Duration
		for _, r := range rs {
			ds = append(ds, f(r))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	return fanResult{
		p50:    med(func(r fanResult) time.Duration { return r.p50 }),
		p99:    med(func(r fanResult) time.Duration { return r.p99 }),
		cpu:    med(func(r fanResult) time.Duration { return r.cpu }),
		events: rs[0].events,
		resps:  rs[0].resps,
	}
}

// measureFanOut opens the scenario's watchers on endpoint, times puts one
// after another on a separate connection, waits until every watcher has
// every event, and returns the put latencies and the CPU per put.
func measureFanOut(t *testing.T, endpoint string, etcdPID int, sc fanScenario, puts int) fanResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
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
	var received, resps atomic.Int64
	var wg sync.WaitGroup
	wctx, wcancel := context.WithCancel(ctx)
	defer func() { wcancel(); wg.Wait() }()
	err := openWatchers(wctx, &wg, watchCli, sc.watchers, sc.streams, key, func(_ int, resp clientv3.WatchResponse) {
		received.Add(int64(len(resp.Events)))
		if len(resp.Events) > 0 {
			resps.Add(1)
		}
	})
	if err != nil {
		t.Fatalf("%s: %v", sc.name, err)
	}
	cpu0 := processCPU(t, os.Getpid()) + processCPU(t, etcdPID)
	lat := make([]time.Duration, 0, puts)
	for i := range puts {
		start := time.Now()
		if _, err := putCli.Put(ctx, key(i*7919%max(sc.watchers, 1)), "v"); err != nil {
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
	cpu := processCPU(t, os.Getpid()) + processCPU(t, etcdPID) - cpu0
	if got := received.Load(); got != want {
		t.Fatalf("%s: %d events delivered, want %d", sc.name, got, want)
	}
	slices.Sort(lat)
	return fanResult{p50: lat[len(lat)/2], p99: lat[(len(lat)*99)/100], cpu: cpu / time.Duration(puts), events: want, resps: resps.Load()}
}

// childPID finds the child process of this one whose command is name.
func childPID(t *testing.T, name string) int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		comm, rest, ok := procStat(b)
		if !ok || comm != name || len(rest) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(rest[1]); ppid == os.Getpid() {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no child process %q", name)
	return 0
}

// procStat splits /proc/<pid>/stat into the command and the fields after
// it (state is rest[0], ppid rest[1], utime rest[11], stime rest[12]).
func procStat(b []byte) (comm string, rest []string, ok bool) {
	s := string(b)
	i, k := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || k < i {
		return "", nil, false
	}
	return s[i+1 : k], strings.Fields(s[k+1:]), true
}

// processCPU is the user and system CPU time pid has used, in clock ticks
// of 10ms (the kernel's USER_HZ).
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	if pid == os.Getpid() {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := procStat(b)
	if !ok || len(rest) < 13 {
		t.Fatalf("cannot read /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(rest[11], 10, 64)
	stime, _ := strconv.ParseInt(rest[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
