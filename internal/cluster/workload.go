package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/januskv/janus/internal/linearize"
)

// Workload drives both faces of an ensemble at once and records what the
// clients saw: register operations on a few etcd keys and ZooKeeper paths
// (for the porcupine models), write-once keys under /w/ from both faces
// (for "no acknowledged write lost" and the watch check), watches on /w/,
// and a contended etcd lock.
type Workload struct {
	// EtcdEndpoints and ZKServers are the ensemble's client addresses.
	EtcdEndpoints []string
	ZKServers     []string
	// EtcdClients and ZKClients are how many register clients run on each
	// face (defaults 4 and 2). Half the etcd clients use every endpoint,
	// half one endpoint each, so both failover and a stuck server are seen.
	EtcdClients int
	ZKClients   int
	// Keys is how many registers each face has (default 3): few keys, many
	// operations per key, make contention.
	Keys int
	// LockClients contend for one etcd lock (default 2).
	LockClients int
	// OpTimeout bounds each client call (default 2s).
	OpTimeout time.Duration
}

// Results are the histories a Workload run recorded.
type Results struct {
	w        Workload
	Etcd     *linearize.History
	ZK       *linearize.History
	mu       sync.Mutex
	acked    map[string]int64 // write-once key -> acknowledged revision (0: unknown)
	holds    []linearize.LockHold
	watches  []*linearize.WatchLog
	start    int64 // revision the watches start at
	failures map[string]int
	clients  sync.WaitGroup // the clients Start started
}

func (w *Workload) defaults() {
	if w.EtcdClients == 0 {
		w.EtcdClients = 4
	}
	if w.ZKClients == 0 {
		w.ZKClients = 2
	}
	if w.Keys == 0 {
		w.Keys = 3
	}
	if w.LockClients == 0 {
		w.LockClients = 2
	}
	if w.OpTimeout == 0 {
		w.OpTimeout = 2 * time.Second
	}
}

func etcdClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: nopLogger()})
	if err != nil {
		t.Fatalf("cluster: etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func zkConn(t testing.TB, servers []string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(discard{}))
	if err != nil {
		t.Fatalf("cluster: zk connect: %v", err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// Run runs the workload until ctx ends and returns what it recorded. The
// caller injects faults meanwhile.
func (w Workload) Run(ctx context.Context, t testing.TB) *Results {
	t.Helper()
	r := w.Start(ctx, t)
	r.Wait()
	return r
}

// Start prepares the workload (its parent nodes, its watches) and starts
// its clients, which run until ctx ends; Wait waits for them. Inject faults
// only after Start returns: the preparation itself expects a working
// ensemble.
func (w Workload) Start(ctx context.Context, t testing.TB) *Results {
	t.Helper()
	w.defaults()
	r := &Results{w: w, Etcd: linearize.NewHistory(), ZK: linearize.NewHistory(), acked: map[string]int64{}, failures: map[string]int{}}

	setup := etcdClient(t, w.EtcdEndpoints)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := setup.Get(sctx, "/w/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		t.Fatalf("cluster: workload setup: %v", err)
	}
	r.start = resp.Header.Revision + 1
	zsetup := zkConn(t, w.ZKServers)
	for _, p := range []string{"/w", "/zk"} {
		// A young ensemble may still change leaders; the client retries
		// what a connection loss interrupted.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := zsetup.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster: create %s: %v", p, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// One watch pinned to the first server, one across every endpoint. They
	// outlive the run: Check reads them up to the last write, then stops them.
	r.watches = append(r.watches,
		linearize.StartWatch(context.Background(), etcdClient(t, w.EtcdEndpoints[:1]), "/w/", r.start),
		linearize.StartWatch(context.Background(), etcdClient(t, w.EtcdEndpoints), "/w/", r.start))
	t.Cleanup(func() {
		for _, wl := range r.watches {
			wl.Stop()
		}
	})

	wg := &r.clients
	for i := range w.EtcdClients {
		eps := w.EtcdEndpoints
		if i%2 == 1 {
			eps = eps[(i/2)%len(eps) : (i/2)%len(eps)+1]
		}
		c := &linearize.EtcdClient{KV: etcdClient(t, eps), H: r.Etcd, ID: i}
		wg.Add(1)
		go func() { defer wg.Done(); r.etcdLoop(ctx, c, i == 0) }()
	}
	for i := range w.ZKClients {
		c := &linearize.ZKClient{Conn: zkConn(t, w.ZKServers), H: r.ZK, ID: i}
		wg.Add(1)
		go func() { defer wg.Done(); r.zkLoop(ctx, c, i == 0) }()
	}
	for i := range w.LockClients {
		cli := etcdClient(t, w.EtcdEndpoints)
		wg.Add(1)
		go func() { defer wg.Done(); r.lockLoop(ctx, cli, i) }()
	}
	return r
}

// Wait waits until the clients Start started have stopped.
func (r *Results) Wait() { r.clients.Wait() }

func (r *Results) fail(what string) {
	r.mu.Lock()
	r.failures[what]++
	r.mu.Unlock()
}

// etcdLoop runs random register operations; the first client also writes
// the write-once keys under /w/.
func (r *Results) etcdLoop(ctx context.Context, c *linearize.EtcdClient, writeOnce bool) {
	rng := rand.New(rand.NewPCG(uint64(c.ID), 1))
	last := map[string]string{}
	for seq := 0; ctx.Err() == nil; seq++ {
		octx, cancel := context.WithTimeout(ctx, r.w.OpTimeout)
		key := fmt.Sprintf("/kv/k%d", rng.IntN(r.w.Keys))
		var err error
		switch p := rng.IntN(10); {
		case writeOnce && p < 3:
			k := fmt.Sprintf("/w/e%d-%d", c.ID, seq)
			var resp *clientv3.PutResponse
			if resp, err = c.KV.Put(octx, k, "x"); err == nil {
				r.mu.Lock()
				r.acked[k] = resp.Header.Revision
				r.mu.Unlock()
			}
		case p < 4:
			last[key], err = c.Get(octx, key)
		case p < 7:
			v := c.Value(seq)
			if err = c.Put(octx, key, v); err == nil {
				last[key] = v
			}
		default:
			v := c.Value(seq)
			var ok bool
			if ok, err = c.CAS(octx, key, last[key], v); err == nil && ok {
				last[key] = v
			} else if err == nil {
				// Learn the current value for the next attempt.
				last[key], err = c.Get(octx, key)
			}
		}
		cancel()
		if err != nil {
			r.fail("etcd")
			pause(ctx, 20*time.Millisecond)
		}
	}
}

// zkLoop runs random znode operations; the first client also creates the
// write-once znodes under /w.
func (r *Results) zkLoop(ctx context.Context, c *linearize.ZKClient, writeOnce bool) {
	rng := rand.New(rand.NewPCG(uint64(c.ID), 2))
	version := map[string]int32{}
	for seq := 0; ctx.Err() == nil; seq++ {
		path := fmt.Sprintf("/zk/p%d", rng.IntN(r.w.Keys))
		var err error
		switch p := rng.IntN(10); {
		case writeOnce && p < 2:
			k := fmt.Sprintf("/w/z%d-%d", c.ID, seq)
			if _, err = c.Conn.Create(k, []byte("x"), 0, zk.WorldACL(zk.PermAll)); err == nil {
				r.mu.Lock()
				r.acked[k] = 0
				r.mu.Unlock()
			}
		case p < 4:
			err = c.Get(path)
		case p < 5:
			err = c.Create(path, c.Value(seq))
		case p < 6:
			err = c.Delete(path, -1)
		default:
			// Mostly conditional sets at the version last seen, so that
			// concurrent writers race and some lose with BadVersion.
			v, known := version[path]
			if !known || rng.IntN(4) == 0 {
				v = -1
			}
			var nv int32
			if nv, err = c.Set(path, c.Value(seq), v); err == nil {
				version[path] = nv
			}
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrBadVersion) {
			r.fail("zk")
			pause(ctx, 20*time.Millisecond)
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			delete(version, path)
		}
	}
}

// lockLoop takes and releases an etcd lock, recording each hold with its
// fencing token: the create revision of the holder's key.
func (r *Results) lockLoop(ctx context.Context, cli *clientv3.Client, id int) {
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(5), concurrency.WithContext(ctx))
		if err != nil {
			r.fail("lock session")
			pause(ctx, 100*time.Millisecond)
			continue
		}
		m := concurrency.NewMutex(s, "/lock/")
		for ctx.Err() == nil {
			select {
			case <-s.Done():
			default:
			}
			lctx, cancel := context.WithTimeout(ctx, 5*r.w.OpTimeout)
			err := m.Lock(lctx)
			acquired := r.Etcd.Now()
			if err != nil {
				cancel()
				r.fail("lock")
				break
			}
			g, err := cli.Get(lctx, m.Key())
			if err == nil && len(g.Kvs) > 0 {
				pause(ctx, 5*time.Millisecond)
				r.mu.Lock()
				r.holds = append(r.holds, linearize.LockHold{Client: id, Token: g.Kvs[0].CreateRevision, Acquired: acquired, Released: r.Etcd.Now()})
				r.mu.Unlock()
			}
			err = m.Unlock(lctx)
			cancel()
			if err != nil {
				r.fail("unlock")
				break
			}
		}
		s.Orphan()
		cctx, cancel := context.WithTimeout(context.Background(), r.w.OpTimeout)
		cli.Revoke(cctx, s.Lease())
		cancel()
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Check runs every check over the results. It first reads the final state
// through both faces (retrying while the ensemble recovers), so the last
// values are part of the histories too.
func (r *Results) Check(t testing.TB) {
	t.Helper()
	w := r.w
	cli := etcdClient(t, w.EtcdEndpoints)
	conn := zkConn(t, w.ZKServers)
	fe := &linearize.EtcdClient{KV: cli, H: r.Etcd, ID: w.EtcdClients}
	fz := &linearize.ZKClient{Conn: conn, H: r.ZK, ID: w.ZKClients}
	retry := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := f(ctx)
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster: final %s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for k := range w.Keys {
		retry("etcd get", func(ctx context.Context) error { _, err := fe.Get(ctx, fmt.Sprintf("/kv/k%d", k)); return err })
		retry("zk get", func(context.Context) error { return fz.Get(fmt.Sprintf("/zk/p%d", k)) })
	}
	var end int64
	retry("end marker", func(ctx context.Context) error {
		resp, err := cli.Put(ctx, "/w/~end", "")
		if err == nil {
			end = resp.Header.Revision
		}
		return err
	})
	final := map[string]int64{}
	retry("range /w/", func(ctx context.Context) error {
		resp, err := cli.Get(ctx, "/w/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			final[string(kv.Key)] = kv.CreateRevision
		}
		return nil
	})

	ops := r.Etcd.Operations()
	linearize.CheckLinearizable(t, "etcd", linearize.EtcdModel, ops, 60*time.Second)
	linearize.CheckLinearizable(t, "zookeeper", linearize.ZKModel, r.ZK.Operations(), 60*time.Second)
	if err := linearize.CheckEtcdRevisions(ops); err != nil {
		t.Errorf("etcd revisions: %v", err)
	}
	if err := linearize.CheckRevisionsMonotonic(r.Etcd.Revisions()); err != nil {
		t.Errorf("etcd revisions per client: %v", err)
	}
	r.mu.Lock()
	acked, holds := r.acked, r.holds
	r.mu.Unlock()
	if err := linearize.CheckNoLostWrites(acked, final); err != nil {
		t.Errorf("no acknowledged write lost: %v", err)
	}
	if err := linearize.CheckLocks(holds); err != nil {
		t.Errorf("lock fencing: %v", err)
	}

	// The reference for the watch check is a fresh watch over the same
	// range, read to the end marker; the acknowledged writes must all be in
	// it at the revision they were acknowledged at.
	ref := linearize.StartWatch(context.Background(), cli, "/w/", r.start)
	waitRev(t, ref, end)
	refEvents, err := ref.Stop()
	if err != nil {
		t.Fatalf("reference watch: %v", err)
	}
	inRef := map[string]int64{}
	for _, e := range refEvents {
		if !e.Delete {
			inRef[e.Key] = e.Rev
		}
	}
	for k, rev := range acked {
		if got, ok := inRef[k]; !ok || (rev != 0 && got != rev) {
			t.Errorf("watch reference: acknowledged write %s@%d is not in the event history (got %d)", k, rev, got)
		}
	}
	for i, wl := range r.watches {
		waitRev(t, wl, end)
		got, err := wl.Stop()
		if err != nil {
			t.Errorf("watch %d: %v", i, err)
		}
		if err := linearize.CheckWatch(got, r.start, refEvents); err != nil {
			t.Errorf("watch %d: %v", i, err)
		}
	}
	r.mu.Lock()
	t.Logf("workload: %d etcd ops, %d zk ops, %d write-once keys acknowledged, %d lock holds, %d reference events, failures %v",
		len(ops), r.ZK.Len(), len(acked), len(holds), len(refEvents), r.failures)
	r.mu.Unlock()
}

// waitRev waits until the watch has delivered revision rev, or fails t:
// a watch that stalls short of the last write is a bug too.
func waitRev(t testing.TB, wl *linearize.WatchLog, rev int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for wl.LastRev() < rev {
		if time.Now().After(deadline) {
			t.Errorf("watch on %s stalled at revision %d, short of %d", wl.Prefix, wl.LastRev(), rev)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// discard is a go-zookeeper logger that drops its reconnect chatter.
type discard struct{}

func (discard) Printf(string, ...any) {}
