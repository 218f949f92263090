package etcdapi_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/server"
)

var (
	watchFanSeed     = flag.Uint64("etcdapi.watchfan-seed", 0, "seed of the many-watchers-per-stream test (0: one from the clock, logged)")
	watchFanWatchers = flag.Int("etcdapi.watchfan-watchers", 2000, "watchers of the fan-out delivery test (the issue's goal is 100000)")
	watchFanStreams  = flag.Int("etcdapi.watchfan-streams", 20, "streams the fan-out delivery test spreads its watchers over (the goal: 1000)")
)

// histEvent is one event as the writer saw it happen.
type histEvent struct {
	rev        int64
	del        bool
	key, value string
	prev       string // "" when the key did not exist
	hadPrev    bool
}

// fanWatcher is one random watcher of TestWatchManyOnOneStream.
type fanWatcher struct {
	key, end  string // end "" one key, "\x00" every key from key on
	start     int64
	prevKV    bool
	noPut     bool
	noDelete  bool
	cancelled bool
	ch        clientv3.WatchChan
	cancel    context.CancelFunc
}

func (w *fanWatcher) matches(key string) bool {
	switch w.end {
	case "":
		return key == w.key
	case "\x00":
		return key >= w.key
	}
	return key >= w.key && key < w.end
}

func (w *fanWatcher) want(hist []histEvent) []string {
	var out []string
	for _, e := range hist {
		if e.rev < w.start || !w.matches(e.key) || (e.del && w.noDelete) || (!e.del && w.noPut) {
			continue
		}
		s := fmt.Sprintf("%d PUT %s=%s", e.rev, e.key, e.value)
		if e.del {
			s = fmt.Sprintf("%d DELETE %s", e.rev, e.key)
		}
		if w.prevKV && e.hadPrev {
			s += " prev=" + e.prev
		}
		out = append(out, s)
	}
	return out
}

func renderEvent(ev *clientv3.Event) string {
	s := fmt.Sprintf("%d PUT %s=%s", ev.Kv.ModRevision, ev.Kv.Key, ev.Kv.Value)
	if ev.Type == mvccpb.DELETE {
		s = fmt.Sprintf("%d DELETE %s", ev.Kv.ModRevision, ev.Kv.Key)
	}
	if ev.PrevKv != nil {
		s += " prev=" + string(ev.PrevKv.Value)
	}
	return s
}

// TestWatchManyOnOneStream opens many watchers on one stream, with start
// revisions in the past (replayed from history), at the present and in the
// future, over single keys, ranges and every-key-from watches with random
// filters and prev_kv, while a writer changes the keys; some watchers are
// cancelled while they may still be catching up. Each watcher must get
// exactly the events the writer's history says it should, in order (a
// cancelled one a prefix of them). The seed is logged and accepted back
// through -etcdapi.watchfan-seed.
func TestWatchManyOnOneStream(t *testing.T) { checkWatchersAgainstHistory(t, 1, 0) }

// TestWatchManyStreams is TestWatchManyOnOneStream with the watchers spread
// over many streams, which the face's one feed serves through its index.
func TestWatchManyStreams(t *testing.T) { checkWatchersAgainstHistory(t, 16, 0) }

// TestWatchManyStreamsFallingBehind is TestWatchManyStreams with room for
// one waiting revision per stream, so a stream whose goroutine has not yet
// delivered the last revision when the next comes goes on from history.
func TestWatchManyStreamsFallingBehind(t *testing.T) { checkWatchersAgainstHistory(t, 16, 1) }

// checkWatchersAgainstHistory runs the random watchers of
// TestWatchManyOnOneStream over the given number of streams, with the
// streams' queues bounded at queueLen revisions (0: the default).
func checkWatchersAgainstHistory(t *testing.T, streams, queueLen int) {
	seed := *watchFanSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -etcdapi.watchfan-seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	j := startJanus(t, func(_ *server.MemberConfig, c *etcdapi.Config) {
		if queueLen > 0 {
			etcdapi.SetWatchQueueLen(c, queueLen)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	c := j.Client
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("m/k%d", i)
	}
	state := map[string]string{}
	var hist []histEvent
	var histMu sync.Mutex
	write := func(i int) {
		k := keys[rng.IntN(len(keys))]
		prev, had := state[k]
		if had && rng.IntN(4) == 0 {
			resp, err := c.Delete(ctx, k)
			if err != nil {
				t.Errorf("delete: %v", err)
				return
			}
			delete(state, k)
			histMu.Lock()
			hist = append(hist, histEvent{rev: resp.Header.Revision, del: true, key: k, prev: prev, hadPrev: true})
			histMu.Unlock()
			return
		}
		v := fmt.Sprintf("v%d", i)
		resp, err := c.Put(ctx, k, v)
		if err != nil {
			t.Errorf("put: %v", err)
			return
		}
		state[k] = v
		histMu.Lock()
		hist = append(hist, histEvent{rev: resp.Header.Revision, key: k, value: v, prev: prev, hadPrev: had})
		histMu.Unlock()
	}
	// Enough history that a watcher from the start replays several chunks.
	const before, during = 300, 150
	for i := range before {
		write(i)
	}
	first := hist[0].rev

	streamCtx := func(i int) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "stream", fmt.Sprint(i))
	}
	watchers := make([]*fanWatcher, 200)
	wrng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := range during {
			write(before + i)
		}
	}()
	for i := range watchers {
		histMu.Lock()
		last := hist[len(hist)-1].rev
		histMu.Unlock()
		w := &fanWatcher{start: first + wrng.Int64N(last-first+4)}
		switch wrng.IntN(4) {
		case 0, 1:
			w.key = keys[wrng.IntN(len(keys))]
		case 2:
			a, b := wrng.IntN(len(keys)), wrng.IntN(len(keys))
			w.key, w.end = keys[min(a, b)], keys[max(a, b)]+"\x00"
		case 3:
			w.key, w.end = keys[wrng.IntN(len(keys))], "\x00"
		}
		opts := []clientv3.OpOption{clientv3.WithRev(w.start)}
		if w.end != "" {
			opts = append(opts, clientv3.WithRange(w.end))
		}
		if w.prevKV = wrng.IntN(3) == 0; w.prevKV {
			opts = append(opts, clientv3.WithPrevKV())
		}
		switch wrng.IntN(6) {
		case 0:
			w.noPut = true
			opts = append(opts, clientv3.WithFilterPut())
		case 1:
			w.noDelete = true
			opts = append(opts, clientv3.WithFilterDelete())
		}
		var wctx context.Context
		wctx, w.cancel = context.WithCancel(streamCtx(wrng.IntN(streams)))
		defer w.cancel()
		w.ch = c.Watch(wctx, w.key, opts...)
		watchers[i] = w
		if wrng.IntN(10) == 0 {
			w.cancelled = true
			w.cancel()
		}
	}
	<-writerDone
	if t.Failed() {
		t.FailNow()
	}
	final := hist[len(hist)-1].rev
	// A progress notification comes after every event up to its revision
	// on every watcher of the stream.
	for i := range streams {
		if err := c.RequestProgress(streamCtx(i)); err != nil {
			t.Fatal(err)
		}
	}

	for i, w := range watchers {
		want := w.want(hist)
		var got []string
	recv:
		for {
			select {
			case resp, ok := <-w.ch:
				if !ok {
					if !w.cancelled {
						t.Fatalf("watcher %d (%+v) closed after %d events", i, *w, len(got))
					}
					break recv
				}
				if err := resp.Err(); err != nil {
					t.Fatalf("watcher %d: %v", i, err)
				}
				for _, ev := range resp.Events {
					got = append(got, renderEvent(ev))
				}
				if resp.IsProgressNotify() && resp.Header.Revision >= final {
					break recv
				}
				if !w.cancelled && len(got) > len(want) {
					break recv
				}
			case <-ctx.Done():
				t.Fatalf("watcher %d (key %q end %q start %d): %d of %d events before the deadline", i, w.key, w.end, w.start, len(got), len(want))
			}
		}
		if w.cancelled {
			want = want[:min(len(got), len(want))]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("watcher %d (key %q end %q start %d prevKV %v noPut %v noDelete %v):\n got %s\nwant %s",
				i, w.key, w.end, w.start, w.prevKV, w.noPut, w.noDelete, strings.Join(got, "|"), strings.Join(want, "|"))
		}
	}
	t.Logf("streams went on from history %d times", j.Server.WatchFellBehind())
}

// TestWatchSlowStreamGoesOnFromHistory has one stream's client stop
// reading while another stream watches the same keys: the other gets every
// event while the slow one is stuck, the slow one's queue overflows, and
// once its client reads again it gets every event exactly once, in order,
// from history.
func TestWatchSlowStreamGoesOnFromHistory(t *testing.T) {
	const queueLen, puts = 4, 600
	j := startJanus(t, func(_ *server.MemberConfig, c *etcdapi.Config) { etcdapi.SetWatchQueueLen(c, queueLen) })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	// A fixed flow-control window: once 64 KiB of responses are unread,
	// the server's sends on this stream block.
	conn, err := grpc.NewClient(strings.TrimPrefix(j.Endpoint, "http://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	slow, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create := &pb.WatchCreateRequest{Key: []byte("slow/"), RangeEnd: []byte("slow0")}
	if err := slow.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := slow.Recv(); err != nil || !resp.Created {
		t.Fatalf("slow watcher not created: %v %v", resp, err)
	}
	fast := j.Client.Watch(ctx, "slow/", clientv3.WithPrefix())

	value := strings.Repeat("v", 1024)
	var revs []int64
	for i := range puts {
		resp, err := j.Client.Put(ctx, fmt.Sprintf("slow/%d", i%10), value)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	var fastRevs []int64
	for len(fastRevs) < puts {
		resp, ok := <-fast
		if !ok || resp.Err() != nil {
			t.Fatalf("fast watcher ended after %d events: %v", len(fastRevs), resp.Err())
		}
		for _, ev := range resp.Events {
			fastRevs = append(fastRevs, ev.Kv.ModRevision)
		}
	}
	if !slices.Equal(fastRevs, revs) {
		t.Fatalf("fast watcher got revisions %v, want %v", fastRevs, revs)
	}
	// The feed has handed every revision to the slow stream by now, which
	// had room for far fewer than it was given.
	if n := j.Server.WatchFellBehind(); n == 0 {
		t.Fatalf("the slow stream never fell behind")
	}
	var slowRevs []int64
	for len(slowRevs) < puts {
		resp, err := slow.Recv()
		if err != nil {
			t.Fatalf("slow watcher after %d events: %v", len(slowRevs), err)
		}
		if resp.Canceled {
			t.Fatalf("slow watcher canceled after %d events: %s", len(slowRevs), resp.CancelReason)
		}
		for _, ev := range resp.Events {
			if ev.Kv == nil || len(ev.Kv.Value) != len(value) {
				t.Fatalf("slow watcher event %d: %v", len(slowRevs), ev)
			}
			slowRevs = append(slowRevs, ev.Kv.ModRevision)
		}
	}
	if !slices.Equal(slowRevs, revs) {
		t.Fatalf("slow watcher got revisions %v, want %v", slowRevs, revs)
	}
}

// TestWatchFanOutDelivery spreads watchers over streams and keys and checks
// that every watcher gets every event of its key. Its default size suits
// the test suite; the 100,000 watchers across 1,000 streams run as
// -etcdapi.watchfan-watchers=100000 -etcdapi.watchfan-streams=1000.
func TestWatchFanOutDelivery(t *testing.T) {
	const nkeys, rounds = 100, 3
	watchers, streams := *watchFanWatchers, *watchFanStreams
	j := startJanus(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	c := j.Client
	var got atomic.Int64
	var wg sync.WaitGroup
	wctx, wcancel := context.WithCancel(ctx)
	defer func() { wcancel(); wg.Wait() }()
	counts := make([]atomic.Int64, watchers)
	began := time.Now()
	err := openWatchers(wctx, &wg, c, watchers, streams, func(i int) string { return fmt.Sprintf("d/%03d", i%nkeys) },
		func(i int, resp clientv3.WatchResponse) {
			counts[i].Add(int64(len(resp.Events)))
			got.Add(int64(len(resp.Events)))
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d watchers on %d streams created in %v", watchers, streams, time.Since(began))
	began = time.Now()
	for r := range rounds {
		for k := range nkeys {
			if _, err := c.Put(ctx, fmt.Sprintf("d/%03d", k), fmt.Sprint(r)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := int64(watchers) * rounds
	for got.Load() < want {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d events delivered", got.Load(), want)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Logf("%d events delivered to %d watchers in %v", want, watchers, time.Since(began))
	// Let any surplus arrive before counting per watcher: a sentinel on
	// every stream comes after everything earlier on it.
	if err := c.RequestProgress(metadata.AppendToOutgoingContext(wctx, "stream", "0")); err != nil {
		t.Fatal(err)
	}
	for i := range counts {
		if n := counts[i].Load(); n != rounds {
			t.Fatalf("watcher %d got %d events, want %d", i, n, rounds)
		}
	}
}

// openWatchers opens n watchers, watcher i on key(i) and on stream
// i%streams, a few at a time (one at a time, the round trips would dominate
// a large test), and hands each response to onResp on a goroutine per
// watcher that wg tracks and that ends with ctx.
func openWatchers(ctx context.Context, wg *sync.WaitGroup, c *clientv3.Client, n, streams int,
	key func(i int) string, onResp func(i int, resp clientv3.WatchResponse)) error {
	const creators = 8
	var created sync.WaitGroup
	errs := make(chan error, creators)
	for c0 := range creators {
		created.Add(1)
		go func() {
			defer created.Done()
			for i := c0; i < n; i += creators {
				sctx := metadata.AppendToOutgoingContext(ctx, "stream", fmt.Sprint(i%streams))
				ch := c.Watch(sctx, key(i), clientv3.WithCreatedNotify())
				if resp := <-ch; !resp.Created {
					errs <- fmt.Errorf("watcher %d not created: %v", i, resp.Err())
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for resp := range ch {
						onResp(i, resp)
					}
				}()
			}
		}()
	}
	created.Wait()
	close(errs)
	return <-errs
}
