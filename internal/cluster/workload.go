package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/januskv/janus/internal/linearize"
)

// Workload drives both faces of an ensemble at once and records what the
// clients saw: register operations on etcd keys and ZooKeeper paths (for
// the porcupine models), write-once keys under /w/ from both faces (for "no
// acknowledged write lost" and the watch check), watches on /w/, and a
// contended etcd lock. It counts the operations that got a definite answer,
// per kind (see Kinds), so a run in which the clients did nothing fails
// instead of passing with nothing to check.
type Workload struct {
	// EtcdEndpoints and ZKServers are the ensemble's client addresses.
	EtcdEndpoints []string
	ZKServers     []string
	// EtcdClients and ZKClients are how many register clients run on each
	// face (defaults 4 and 2). Half the etcd clients use every endpoint,
	// half one endpoint each, so both failover and a stuck server are seen.
	EtcdClients int
	ZKClients   int
	// Keys is how many registers each face uses at a time (default 4):
	// few keys make contention.
	Keys int
	// OpsPerKey bounds the operations on one register (default 40): after
	// Keys*OpsPerKey operations a face moves on to a fresh set of keys, so
	// each porcupine partition stays small enough to check in seconds on a
	// busy machine, however long the run.
	OpsPerKey int
	// LockClients contend for one etcd lock (default 2).
	LockClients int
	// OpTimeout bounds each client call (default 2s).
	OpTimeout time.Duration
	// Seed seeds every client's choices; 0 takes $JANUS_CLUSTER_SEED, else
	// the clock. Start logs it.
	Seed uint64
	// MinAcks is how many operations of each kind must have had a definite
	// answer over the whole run (default 10); Check fails otherwise.
	MinAcks int
}

// Kinds are the operation kinds the workload counts. Each must make
// progress over a run (Check) and after every fault (WaitProgress).
var Kinds = []string{
	"etcd get", "etcd put", "etcd cas", "etcd write-once",
	"zk get", "zk create", "zk set", "zk delete", "zk write-once",
	"lock hold",
}

// seed returns the seed a randomized test runs with: $env if set (to replay
// a logged run), else one from the clock. The caller logs it.
func seed(t testing.TB, env string) uint64 {
	t.Helper()
	if s := os.Getenv(env); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
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
	acks     map[string]int // operations with a definite answer, per kind
	clients  sync.WaitGroup // the clients Start started
	// etcdOps and zkOps count the register operations started on each
	// face; they pick the generation of keys (see OpsPerKey).
	etcdOps, zkOps atomic.Int64
}

func (w *Workload) defaults() {
	if w.EtcdClients == 0 {
		w.EtcdClients = 4
	}
	if w.ZKClients == 0 {
		w.ZKClients = 2
	}
	if w.Keys == 0 {
		w.Keys = 4
	}
	if w.OpsPerKey == 0 {
		w.OpsPerKey = 40
	}
	if w.MinAcks == 0 {
		w.MinAcks = 10
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
	if w.Seed == 0 {
		w.Seed = seed(t, "JANUS_CLUSTER_SEED")
	}
	t.Logf("workload seed %d (replay with JANUS_CLUSTER_SEED=%d)", w.Seed, w.Seed)
	r := &Results{w: w, Etcd: linearize.NewHistory(), ZK: linearize.NewHistory(), acked: map[string]int64{}, failures: map[string]int{}, acks: map[string]int{}}

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

// ack counts an operation of kind that had a definite answer.
func (r *Results) ack(kind string) {
	r.mu.Lock()
	r.acks[kind]++
	r.mu.Unlock()
}

// Acks returns how many operations of each kind have had a definite
// answer so far.
func (r *Results) Acks() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.acks)
}

// WaitProgress waits until every kind has had at least n more definite
// answers than in since (an Acks snapshot taken before a fault), or ctx
// ends: then it names the kinds that made no progress. A fault after which
// the workload never recovers would otherwise pass every check with
// nothing to check.
func (r *Results) WaitProgress(ctx context.Context, since map[string]int, n int) error {
	return waitProgress(ctx, Kinds, r.Acks, since, n)
}

// waitProgress waits until each of kinds has at least n more definite
// answers in acks() than in since, or ctx ends: then it names the kinds
// that fell short.
func waitProgress(ctx context.Context, kinds []string, acks func() map[string]int, since map[string]int, n int) error {
	for {
		now := acks()
		var stuck []string
		for _, k := range kinds {
			if now[k]-since[k] < n {
				stuck = append(stuck, fmt.Sprintf("%s (%d)", k, now[k]-since[k]))
			}
		}
		if len(stuck) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no progress (fewer than %d definite answers) in %v", n, stuck)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tooLittle names every kind of operation that had fewer than MinAcks
// definite answers over the run: with nothing done, every other check
// would pass with nothing to check.
func (r *Results) tooLittle() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range Kinds {
		if r.acks[k] < r.w.MinAcks {
			out = append(out, fmt.Sprintf("the workload did too little to check: %d %s operations had a definite answer, want at least %d (all: %v; failures %v)", r.acks[k], k, r.w.MinAcks, r.acks, r.failures))
		}
	}
	return out
}

// key returns the name of register i of the current generation of keys:
// n is the count of register operations started on the face so far.
func (r *Results) key(prefix string, n int64, i int) string {
	gen := n / int64(r.w.Keys*r.w.OpsPerKey)
	return fmt.Sprintf("%sg%d-k%d", prefix, gen, i)
}

// etcdLoop runs random register operations; the first client also writes
// the write-once keys under /w/.
func (r *Results) etcdLoop(ctx context.Context, c *linearize.EtcdClient, writeOnce bool) {
	rng := rand.New(rand.NewPCG(r.w.Seed, uint64(c.ID)<<8|1))
	last := map[string]string{}
	for seq := 0; ctx.Err() == nil; seq++ {
		octx, cancel := context.WithTimeout(ctx, r.w.OpTimeout)
		var err error
		switch p := rng.IntN(10); {
		case writeOnce && p < 3:
			k := fmt.Sprintf("/w/e%d-%d", c.ID, seq)
			var resp *clientv3.PutResponse
			if resp, err = c.KV.Put(octx, k, "x"); err == nil {
				r.mu.Lock()
				r.acked[k] = resp.Header.Revision
				r.acks["etcd write-once"]++
				r.mu.Unlock()
			}
		case p < 4:
			key := r.key("/kv/", r.etcdOps.Add(1), rng.IntN(r.w.Keys))
			if last[key], err = c.Get(octx, key); err == nil {
				r.ack("etcd get")
			}
		case p < 7:
			key := r.key("/kv/", r.etcdOps.Add(1), rng.IntN(r.w.Keys))
			v := c.Value(seq)
			if err = c.Put(octx, key, v); err == nil {
				last[key] = v
				r.ack("etcd put")
			}
		default:
			key := r.key("/kv/", r.etcdOps.Add(1), rng.IntN(r.w.Keys))
			v := c.Value(seq)
			var ok bool
			if ok, err = c.CAS(octx, key, last[key], v); err == nil {
				r.ack("etcd cas")
				if ok {
					last[key] = v
				} else {
					// Learn the current value for the next attempt.
					last[key], err = c.Get(octx, key)
				}
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
	rng := rand.New(rand.NewPCG(r.w.Seed, uint64(c.ID)<<8|2))
	version := map[string]int32{}
	for seq := 0; ctx.Err() == nil; seq++ {
		// Register paths are flat (/zk/g<gen>-k<i>), so a new generation
		// needs no parent node.
		path := r.key("/zk/", r.zkOps.Add(1), rng.IntN(r.w.Keys))
		var err error
		kind := ""
		switch p := rng.IntN(10); {
		case writeOnce && p < 2:
			kind = "zk write-once"
			k := fmt.Sprintf("/w/z%d-%d", c.ID, seq)
			if _, err = c.Conn.Create(k, []byte("x"), 0, zk.WorldACL(zk.PermAll)); err == nil {
				r.mu.Lock()
				r.acked[k] = 0
				r.mu.Unlock()
			}
		case p < 4:
			kind = "zk get"
			err = c.Get(path)
		case p < 5:
			kind = "zk create"
			err = c.Create(path, c.Value(seq))
		case p < 6:
			kind = "zk delete"
			err = c.Delete(path, -1)
		default:
			kind = "zk set"
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
		definite := err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion)
		if definite {
			r.ack(kind)
		} else {
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
				r.acks["lock hold"]++
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
		ekey, zpath := r.key("/kv/", r.etcdOps.Load(), k), r.key("/zk/", r.zkOps.Load(), k)
		retry("etcd get", func(ctx context.Context) error { _, err := fe.Get(ctx, ekey); return err })
		retry("zk get", func(context.Context) error { return fz.Get(zpath) })
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

	for _, p := range r.tooLittle() {
		t.Error(p)
	}
	ops := r.Etcd.Operations()
	linearize.CheckLinearizable(t, "etcd", w.Seed, linearize.EtcdModel, ops, 60*time.Second)
	linearize.CheckLinearizable(t, "zookeeper", w.Seed, linearize.ZKModel, r.ZK.Operations(), 60*time.Second)
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
	t.Logf("workload (seed %d): %d etcd ops, %d zk ops, %d write-once keys acknowledged, %d lock holds, %d reference events, definite answers %v, failures %v",
		w.Seed, len(ops), r.ZK.Len(), len(acked), len(holds), len(refEvents), r.acks, r.failures)
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
