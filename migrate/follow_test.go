package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/migrate"
)

// cutProxy forwards TCP connections to a server and can cut them all, and
// refuse new ones, to play a network failure between a follower and its
// source.
type cutProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []net.Conn
	refuse bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut(true)
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.refuse {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
		p.mu.Unlock()
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// cut closes every forwarded connection; with refuse, new ones are closed
// on arrival until resume.
func (p *cutProxy) cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = false
}

// seed returns the workload seed: JANUS_MIGRATE_SEED replays a run.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("JANUS_MIGRATE_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("JANUS_MIGRATE_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (JANUS_MIGRATE_SEED=%d replays it)", s, s)
	return s
}

// zkWorkload writes a ZooKeeper tree the way applications do: creates
// (nested, sequential, ephemeral), setData, deletes and multis.
type zkWorkload struct {
	c    *zk.Conn
	rng  *rand.Rand
	live []string // persistent nodes it created and has not deleted
	ops  int
}

func (w *zkWorkload) step(t *testing.T) {
	t.Helper()
	w.ops++
	pick := func() (string, int) {
		i := w.rng.IntN(len(w.live))
		return w.live[i], i
	}
	data := []byte(fmt.Sprintf("v%d-%d", w.ops, w.rng.IntN(1000)))
	ignore := func(err error) {
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNotEmpty) {
			t.Fatalf("source op %d: %v", w.ops, err)
		}
	}
	switch r := w.rng.IntN(10); {
	case r < 3 || len(w.live) < 5: // create, below an existing node half the time
		parent := "/app"
		if len(w.live) > 0 && w.rng.IntN(2) == 0 {
			parent, _ = pick()
		}
		p, err := w.c.Create(fmt.Sprintf("%s/n%d", parent, w.ops), data, 0, zk.WorldACL(zk.PermAll))
		ignore(err)
		if err == nil {
			w.live = append(w.live, p)
		}
	case r < 6:
		p, _ := pick()
		_, err := w.c.Set(p, data, -1)
		ignore(err)
	case r < 8: // delete a leaf
		p, i := pick()
		err := w.c.Delete(p, -1)
		ignore(err)
		if err == nil {
			w.live = slices.Delete(w.live, i, i+1)
		}
	case r < 9: // a multi: create, set and delete together
		a, _ := pick()
		b, i := pick()
		created := fmt.Sprintf("/app/m%d", w.ops)
		ops := []any{
			&zk.CreateRequest{Path: created, Data: data, Acl: zk.WorldACL(zk.PermAll)},
			&zk.SetDataRequest{Path: a, Data: data, Version: -1},
			&zk.DeleteRequest{Path: b, Version: -1},
		}
		if a == b {
			ops = ops[:2]
		}
		_, err := w.c.Multi(ops...)
		ignore(err)
		if err == nil {
			w.live = append(w.live, created)
			if a != b {
				w.live = slices.Delete(w.live, i, i+1)
			}
		}
	case w.rng.IntN(3) == 0: // a persistent leaf turned ephemeral
		p, i := pick()
		if err := w.c.Delete(p, -1); err == nil {
			w.live = slices.Delete(w.live, i, i+1)
			_, err = w.c.Create(p, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			ignore(err)
		} else {
			ignore(err)
		}
	default: // sequential and ephemeral nodes
		p, err := w.c.Create("/app/seq-", data, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		ignore(err)
		if err == nil {
			w.live = append(w.live, p)
		}
		_, err = w.c.Create(fmt.Sprintf("/app/eph%d", w.ops), data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		ignore(err)
	}
}

// readTree returns path -> data of every persistent node under root, read
// independently of the migrate package.
func readTree(t *testing.T, c *zk.Conn, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(p string)
	walk = func(p string) {
		if p == "/zookeeper" {
			return // each server's own
		}
		data, st, err := c.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		if st.EphemeralOwner != 0 {
			return
		}
		out[p] = string(data)
		kids, _, err := c.Children(p)
		if err != nil {
			t.Fatalf("children of %s: %v", p, err)
		}
		for _, k := range kids {
			walk(strings.TrimSuffix(p, "/") + "/" + k)
		}
	}
	walk(root)
	return out
}

func sameTree(t *testing.T, src, dst map[string]string) {
	t.Helper()
	n := 0
	for p, v := range src {
		if w, ok := dst[p]; !ok || w != v {
			t.Errorf("source %s = %q, target has %q (present %v)", p, v, w, ok)
			n++
		}
	}
	for p := range dst {
		if _, ok := src[p]; !ok {
			t.Errorf("target has %s, the source does not", p)
			n++
		}
	}
	if n == 0 {
		t.Logf("source and target equal: %d nodes", len(src))
	}
}

type runResult struct {
	rep *migrate.Report
	err error
}

func runAsync(ctx context.Context, cfg migrate.Config) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		rep, err := migrate.Run(ctx, cfg)
		done <- runResult{rep, err}
	}()
	return done
}

// TestFollowZooKeeperUnderWritesAndCut follows a real ZooKeeper 3.8 into
// Janus while the source is written continuously, cuts the follower's
// connection in the middle (and keeps it cut while writes go on), then cuts
// over: the target must equal the source, with nothing missed while the
// follower was away.
func TestFollowZooKeeperUnderWritesAndCut(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	proxy := startProxy(t, ref.Addr)
	src, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	if _, err := src.Create("/app", []byte("app"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	w := &zkWorkload{c: src, rng: rand.New(rand.NewPCG(seed(t), 19))}
	for range 200 {
		w.step(t)
	}
	j := janustest.Start(t, janustest.Options{})
	ctx := testCtx(t)

	var out syncBuffer
	state := &migrate.FollowState{}
	runCtx, cutover := context.WithCancel(ctx)
	defer cutover()
	cfg := migrate.Config{From: endpoint(t, "zk://"+proxy.Addr()+"/app"), To: endpoint(t, "zk://"+j.ZKAddr),
		Out: &out, Follow: true, State: state, ProgressEvery: 100, StatusEvery: 200 * time.Millisecond, DialTimeout: 5 * time.Second}
	done := runAsync(runCtx, cfg)
	waitFor(t, &out, "following")

	// Steady writes: the lag is sampled after each one and logged (a
	// measurement, not an assertion: timing here depends on the machine).
	var maxLag migrate.FollowStatus
	steady := time.Now()
	for range 300 {
		w.step(t)
		if st := state.Status(); st.Lag > maxLag.Lag || st.PendingEvents > maxLag.PendingEvents {
			maxLag.Lag, maxLag.PendingEvents = max(st.Lag, maxLag.Lag), max(st.PendingEvents, maxLag.PendingEvents)
		}
	}
	t.Logf("steady load: 300 source writes at %.0f/s; largest lag seen %d events, %v", 300/time.Since(steady).Seconds(), maxLag.PendingEvents, maxLag.Lag)
	// The follower loses its connection and cannot reconnect while the
	// source goes on changing.
	proxy.cut(true)
	for range 300 {
		w.step(t)
	}
	proxy.resume()
	waitFor(t, &out, "re-synced")
	for range 300 {
		w.step(t)
	}
	cutover()
	res := <-done
	t.Logf("output:\n%s", out.String())
	if res.err != nil {
		t.Fatalf("migrate: %v", res.err)
	}
	st := state.Status()
	if !st.CaughtUp || st.Resyncs < 1 || st.PendingEvents != 0 {
		t.Errorf("status after cut-over %+v: want caught up, at least one resync, nothing pending", st)
	}
	if res.rep.Followed == 0 {
		t.Error("no event followed")
	}
	for _, want := range []string{"lost the source's change stream", "cut-over verified", "following: applied"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	dst, _ := j.ZKClient(t, 10*time.Second)
	sameTree(t, readTree(t, src, "/app"), readTree(t, dst, "/app"))
}

// TestCutoverAfterWritersStop is the second half of a move: an earlier
// copy, writes since, then --cutover alone re-syncs (deletes included),
// verifies and says what to do next; a cut-over while the source still
// differs on something no event reports (an ACL) is caught by the re-list.
func TestCutoverAfterWritersStop(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	src, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	populateZK(t, src)
	j := janustest.Start(t, janustest.Options{})
	ctx := testCtx(t)
	cfg := migrate.Config{From: endpoint(t, "zk://"+ref.Addr), To: endpoint(t, "zk://"+j.ZKAddr), Out: io.Discard, Auth: adminAuth}
	if _, err := migrate.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// Changes after the copy, with no follower running.
	if err := src.Delete("/deep/a/b/c/d", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Set("/app/empty", []byte("now full"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Create("/app/new", []byte("new"), 0, zk.WorldACL(zk.PermRead|zk.PermWrite)); err != nil {
		t.Fatal(err)
	}
	if _, err := src.SetACL("/app/binary", zk.WorldACL(zk.PermRead), -1); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cfg.Out, cfg.Cutover = &out, true
	rep, err := migrate.Run(ctx, cfg)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("cut-over: %v", err)
	}
	if rep.Deleted != 1 || rep.Copied != 2 {
		t.Errorf("cut-over wrote %d nodes (want 2: the new one, the changed data) and deleted %d (want 1)", rep.Copied, rep.Deleted)
	}
	if !strings.Contains(out.String(), "cut-over verified") || !strings.Contains(out.String(), "connect string") {
		t.Errorf("no next steps printed")
	}
	dst, _ := j.ZKClient(t, 10*time.Second)
	if acl, _, err := dst.GetACL("/app/binary"); err != nil || len(acl) != 1 || acl[0].Perms != zk.PermRead {
		t.Errorf("target ACL of /app/binary %v %v, want world read", acl, err)
	}
	sameTree(t, readTree(t, src, "/"), readTree(t, dst, "/"))
}

// TestFollowZooKeeperIntoEtcdFace follows a real ZooKeeper into Janus's
// etcd face (data only) under writes: after the cut-over every persistent
// node is a key with its data, and nothing else is.
func TestFollowZooKeeperIntoEtcdFace(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	src, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	if _, err := src.Create("/app", []byte("app"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	w := &zkWorkload{c: src, rng: rand.New(rand.NewPCG(seed(t), 20))}
	for range 100 {
		w.step(t)
	}
	j := janustest.Start(t, janustest.Options{})
	rep := followUntil(t, migrate.Config{From: endpoint(t, "zk://"+ref.Addr+"/app"), To: endpoint(t, "etcd://"+j.EtcdAddr)}, func() {
		for range 300 {
			w.step(t)
		}
	})
	if rep.Followed == 0 {
		t.Error("no event followed")
	}
	want := readTree(t, src, "/app")
	got := etcdKeys(t, j.EtcdClient(t))
	sameTree(t, want, got)
}
