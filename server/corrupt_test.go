package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zab"
	"github.com/januskv/janus/zkapi"
)

// lockedBuffer collects one member's log lines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv("JANUS_TEST_LOG") != "" {
		os.Stderr.Write(p)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// replicaCluster is three in-process voters (and maybe observers, IDs 4
// on) on zab's in-memory network.
type replicaCluster struct {
	t         *testing.T
	net       *zab.MemNetwork
	peers     map[uint64]string
	observers map[uint64]string
	dirs      map[uint64]string
	logs      map[uint64]*lockedBuffer
	members   map[uint64]*Member
}

func newReplicaCluster(t *testing.T) *replicaCluster { return newReplicaClusterWith(t, 0) }

func newReplicaClusterWith(t *testing.T, observers int) *replicaCluster {
	c := &replicaCluster{t: t, net: zab.NewMemNetwork(uint64(time.Now().UnixNano())), peers: map[uint64]string{},
		observers: map[uint64]string{}, dirs: map[uint64]string{}, logs: map[uint64]*lockedBuffer{}, members: map[uint64]*Member{}}
	for id := uint64(1); id <= uint64(3+observers); id++ {
		if id <= 3 {
			c.peers[id] = fmt.Sprintf("mem-%d", id)
		} else {
			c.observers[id] = fmt.Sprintf("mem-%d", id)
		}
		c.dirs[id] = t.TempDir()
		c.logs[id] = &lockedBuffer{}
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.Close()
		}
		c.net.Wait()
		if t.Failed() {
			// What the checks and elections did, for the failure's reader.
			for id := uint64(1); id <= uint64(len(c.logs)); id++ {
				for _, l := range c.logs[id].lines("") {
					if strings.Contains(l, "corrupt") || strings.Contains(l, "alarm") || strings.Contains(l, "role changed") {
						t.Logf("member %d: %s", id, l)
					}
				}
			}
		}
	})
	return c
}

// start opens member id; tweak adjusts its configuration.
func (c *replicaCluster) start(id uint64, tweak func(*MemberConfig)) *Member {
	c.t.Helper()
	cfg := MemberConfig{
		DataDir: c.dirs[id], ID: id, Peers: c.peers, Observers: c.observers, Transport: c.net.Endpoint(id),
		Logger:          slog.New(slog.NewTextHandler(c.logs[id], &slog.HandlerOptions{Level: slog.LevelInfo})).With("member", id),
		ElectionTimeout: 200 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	m, err := OpenMember(cfg)
	if err != nil {
		c.t.Fatalf("open member %d: %v", id, err)
	}
	c.members[id] = m
	return m
}

func (c *replicaCluster) stop(id uint64) {
	c.t.Helper()
	if err := c.members[id].Close(); err != nil {
		c.t.Fatalf("close member %d: %v", id, err)
	}
	delete(c.members, id)
}

// waitFor polls cond until it holds; the bound is only there so that a
// broken build fails instead of hanging.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// propose retries through elections: a write here only sets the stage.
func (c *replicaCluster) propose(m *Member, op *core.Op) *core.Result {
	c.t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := m.Propose(ctx, op)
		cancel()
		if err == nil {
			return res
		}
		if !errors.Is(err, core.ErrNoLeader) && !errors.Is(err, core.ErrLeaderChanged) && !errors.Is(err, context.DeadlineExceeded) {
			c.t.Fatalf("propose: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle waits until every running member has applied what member 1 has.
func (c *replicaCluster) settle() {
	c.t.Helper()
	waitFor(c.t, "members to apply the same log", func() bool {
		var idx []uint64
		for _, m := range c.members {
			idx = append(idx, m.Status().AppliedIndex)
		}
		return slices.Min(idx) == slices.Max(idx)
	})
}

// check proposes a HashCheck through m, as the leader's ticker would.
func (c *replicaCluster) check(m *Member) {
	c.t.Helper()
	c.propose(m, &core.Op{HashCheck: &core.HashCheck{}})
}

func (c *replicaCluster) allList(alarms []core.Alarm) func() bool {
	return func() bool {
		for _, m := range c.members {
			if !slices.Equal(m.Alarms(), alarms) {
				return false
			}
		}
		return true
	}
}

// forkOn returns a tamper that makes a member store another value for
// every put of key: its state forks from the others' at that put.
func forkOn(key string) func(*core.Entry) {
	return func(e *core.Entry) {
		if e.Op.Txn == nil {
			return
		}
		for i, op := range e.Op.Txn.Success {
			if op.Kind == core.OpPut && string(op.Key) == key {
				e.Op.Txn.Success[i].Value = []byte("forked")
			}
		}
	}
}

var corrupt3 = []core.Alarm{{Member: 3, Type: core.AlarmCorrupt}}

// TestCorruptionCheckFindsTheForkedMember damages member 3's state (it
// applies one put with another value) and checks that a corruption check
// names member 3, every member lists the alarm (through etcd's alarm list
// too), member 3 refuses clients on both faces while 1 and 2 serve, mntr
// shows the alarm, and disarming it lets member 3 serve again until the
// next check finds it again.
func TestCorruptionCheckFindsTheForkedMember(t *testing.T) {
	c := newReplicaCluster(t)
	c.start(1, nil)
	c.start(2, nil)
	m3 := c.start(3, func(cfg *MemberConfig) { cfg.tamper = forkOn("victim") })
	m1 := c.members[1]
	for i := range 20 {
		c.propose(m1, putOp(fmt.Sprintf("k%d", i), "v", 0))
	}
	c.check(m1)
	c.settle()
	waitFor(t, "a check to pass on every member", func() bool {
		for _, m := range c.members {
			if m.checker.passed.Load() == 0 {
				return false
			}
		}
		return true
	})
	if a := m1.Alarms(); len(a) != 0 {
		t.Fatalf("alarms %v before any damage", a)
	}

	sub, err := m3.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	watchEnded := make(chan error, 1)
	go func() {
		for range sub.Events() {
		}
		watchEnded <- sub.Err()
	}()
	c.propose(m1, putOp("victim", "good", 0))
	c.check(m1)
	waitFor(t, "every member to list member 3's CORRUPT alarm", c.allList(corrupt3))
	// The damaged member's open watch ends, and a new one is refused.
	select {
	case err := <-watchEnded:
		if err == nil {
			t.Fatal("watch on the damaged member ended without an error")
		}
	case <-time.After(60 * time.Second): // only so that a broken build fails instead of hanging
		t.Fatal("watch on the damaged member still open")
	}
	if _, err := m3.Watch(0); !errors.Is(err, core.ErrCorrupt) {
		t.Fatalf("new watch on the damaged member: %v", err)
	}
	for id, m := range c.members {
		if got := m.Corrupt(); got != (id == 3) {
			t.Errorf("member %d: Corrupt() = %v", id, got)
		}
		if st := m.Status(); !slices.Equal(st.Alarms, []string{"CORRUPT"}) {
			t.Errorf("member %d: Status().Alarms = %v", id, st.Alarms)
		}
	}
	// One ERROR line on each member names the damaged member, the check's
	// index and revision and every member's hash.
	for id := range c.members {
		lines := c.logs[id].lines("level=ERROR")
		if len(lines) != 1 || !strings.Contains(lines[0], "damaged=[3]") || !strings.Contains(lines[0], "rev=") ||
			!strings.Contains(lines[0], "1=") || !strings.Contains(lines[0], "3=") {
			t.Errorf("member %d logged %q, want one ERROR line naming member 3 and the hashes", id, lines)
		}
	}

	ctx := context.Background()
	if _, err := m3.Read(ctx, 0); !errors.Is(err, core.ErrCorrupt) {
		t.Fatalf("damaged member read: %v", err)
	}
	if _, err := m3.Propose(ctx, putOp("x", "y", 0)); !errors.Is(err, core.ErrCorrupt) {
		t.Fatalf("damaged member write: %v", err)
	}

	faces := map[uint64]*testFaces{}
	for id, m := range c.members {
		faces[id] = startFaces(t, m)
	}
	// etcd clients: the alarm list is the same on every member, the damaged
	// member answers "corrupt cluster", the others serve.
	for id, f := range faces {
		cli := f.etcdClient(t)
		resp, err := cli.AlarmList(ctx)
		if err != nil {
			t.Fatalf("member %d: alarm list: %v", id, err)
		}
		if len(resp.Alarms) != 1 || resp.Alarms[0].MemberID != 3 || resp.Alarms[0].Alarm != pb.AlarmType_CORRUPT {
			t.Fatalf("member %d: alarm list %v", id, resp.Alarms)
		}
		_, err = cli.Put(ctx, fmt.Sprintf("from-%d", id), "v")
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, gerr := cli.Get(gctx, "k1")
		cancel()
		if id == 3 {
			if !errors.Is(err, rpctypes.ErrCorrupt) || !errors.Is(gerr, rpctypes.ErrCorrupt) {
				t.Fatalf("damaged member: put %v, get %v; want %v", err, gerr, rpctypes.ErrCorrupt)
			}
		} else if err != nil || gerr != nil {
			t.Fatalf("healthy member %d: put %v, get %v", id, err, gerr)
		}
	}
	if out := etcdctl(t, faces[1].etcdAddr, "alarm", "list"); !strings.Contains(out, "memberID:3 alarm:CORRUPT") {
		t.Fatalf("etcdctl alarm list: %q", out)
	}
	// ZooKeeper: mntr shows the alarm on every member; the damaged member
	// drops a client's request (ConnectionLoss), the others answer.
	for id, f := range faces {
		if out := fourLetter(t, f.zkAddr, "mntr"); !strings.Contains(out, "janus_alarms\t3:CORRUPT\n") ||
			!strings.Contains(out, "janus_alarm_count\t1\n") {
			t.Fatalf("member %d mntr: %q", id, out)
		}
		if got := zkSession(t, f.zkAddr); got != (id != 3) {
			t.Fatalf("member %d: ZooKeeper session established: %v", id, got)
		}
	}

	// etcdctl alarm disarm clears it everywhere; member 3 serves (its
	// damaged state) until the next check raises the alarm again.
	if out := etcdctl(t, faces[1].etcdAddr, "alarm", "disarm"); !strings.Contains(out, "memberID:3 alarm:CORRUPT") {
		t.Fatalf("etcdctl alarm disarm: %q", out)
	}
	waitFor(t, "the alarm to clear everywhere", c.allList(nil))
	if _, err := faces[3].etcdClient(t).Get(ctx, "k1"); err != nil {
		t.Fatalf("member 3 after disarm: %v", err)
	}
	c.check(m1)
	waitFor(t, "the next check to raise the alarm again", c.allList(corrupt3))
}

// TestInitialCorruptionCheck restarts a member whose state was damaged
// while no checks ran: its start-up check finds it.
func TestInitialCorruptionCheck(t *testing.T) {
	c := newReplicaCluster(t)
	c.start(1, nil)
	c.start(2, nil)
	c.start(3, func(cfg *MemberConfig) { cfg.tamper = forkOn("victim") })
	c.propose(c.members[1], putOp("victim", "good", 0))
	c.settle()
	c.stop(3)
	m3 := c.start(3, func(cfg *MemberConfig) { cfg.InitialCorruptCheck = true })
	waitFor(t, "the start-up check to raise member 3's alarm", c.allList(corrupt3))
	if !m3.Corrupt() || c.members[1].Corrupt() || c.members[2].Corrupt() {
		t.Fatalf("corrupt: 1=%v 2=%v 3=%v", c.members[1].Corrupt(), c.members[2].Corrupt(), m3.Corrupt())
	}
	// The alarm is replicated state: it survives a restart.
	c.stop(3)
	m3 = c.start(3, nil)
	if !m3.Corrupt() {
		t.Fatal("member 3 serves again after a restart")
	}
}

// TestPeriodicCorruptionCheck leaves detection to the leader's ticker.
func TestPeriodicCorruptionCheck(t *testing.T) {
	c := newReplicaCluster(t)
	every := func(cfg *MemberConfig) { cfg.CorruptCheckInterval = 20 * time.Millisecond }
	c.start(1, every)
	c.start(2, every)
	c.start(3, func(cfg *MemberConfig) { every(cfg); cfg.tamper = forkOn("victim") })
	c.propose(c.members[1], putOp("victim", "good", 0))
	waitFor(t, "a periodic check to raise member 3's alarm", c.allList(corrupt3))
}

// TestNoFalseCorruptionAlarm runs checks as often as they can go while
// writers on every member and compactions keep the members at different
// applied indexes: healthy members must never be told apart.
func TestNoFalseCorruptionAlarm(t *testing.T) {
	c := newReplicaCluster(t)
	every := func(cfg *MemberConfig) { cfg.CorruptCheckInterval = 5 * time.Millisecond }
	for id := uint64(1); id <= 3; id++ {
		c.start(id, every)
	}
	const writes = 300
	var wg sync.WaitGroup
	for id, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				key := fmt.Sprintf("w%d/%d", id, i%17)
				res := c.propose(m, putOp(key, fmt.Sprint(i), 0))
				if i%50 == 49 {
					res = c.propose(m, &core.Op{Compact: &core.Compact{Rev: res.Rev - 5}})
					if res.Err != nil && !errors.Is(res.Err, core.ErrCompacted) {
						t.Errorf("compact: %v", res.Err)
					}
				}
			}
		}()
	}
	wg.Wait()
	c.check(c.members[1])
	c.settle()
	waitFor(t, "checks to pass on every member", func() bool {
		for _, m := range c.members {
			if m.checker.passed.Load() < 2 {
				return false
			}
		}
		return true
	})
	for id, m := range c.members {
		if a := m.Alarms(); len(a) != 0 {
			t.Errorf("member %d lists %v", id, a)
		}
		if lines := c.logs[id].lines("level=ERROR"); len(lines) != 0 {
			t.Errorf("member %d logged %q", id, lines)
		}
		t.Logf("member %d: %d checks passed", id, m.checker.passed.Load())
	}
}

// testFaces are one member's etcd and ZooKeeper faces on loopback ports.
type testFaces struct {
	etcdAddr, zkAddr string
}

func startFaces(t *testing.T, m *Member) *testFaces {
	t.Helper()
	el, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	zl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := etcdapi.New(m, etcdapi.Config{})
	z := zkapi.New(m, zkapi.Config{FourLetterWhitelist: []string{"mntr"}})
	served := make(chan error, 2)
	go func() { served <- e.Serve(el) }()
	go func() { served <- z.Serve(zl) }()
	t.Cleanup(func() {
		e.Stop()
		z.Close()
		<-served
		<-served
	})
	return &testFaces{etcdAddr: el.Addr().String(), zkAddr: zl.Addr().String()}
}

func (f *testFaces) etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.etcdAddr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func etcdctl(t *testing.T, endpoint string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.EtcdctlPath(t), append([]string{"--endpoints", endpoint}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func fourLetter(t *testing.T, addr, word string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte(word))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	out, _ := io.ReadAll(nc)
	return string(out)
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// zkSession connects a ZooKeeper client to addr and reports whether the
// server gave it a session (and answered a read in it) before closing the
// connection on it.
func zkSession(t *testing.T, addr string) bool {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for ev := range events {
		switch ev.State {
		case zk.StateHasSession:
			_, _, err := conn.Get("/")
			return err == nil
		case zk.StateDisconnected:
			return false
		}
	}
	return false
}

// TestCorruptLeaderIsFound damages the leader's state, the case where a
// leader would answer from a forked state: the majority of followers
// outvotes it, it refuses clients, and the followers keep serving writes
// (which the damaged member's log still orders: only its state is bad).
func TestCorruptLeaderIsFound(t *testing.T) {
	c := newReplicaCluster(t)
	var damaged atomic.Uint64
	for id := uint64(1); id <= 3; id++ {
		fork := forkOn("victim")
		c.start(id, func(cfg *MemberConfig) {
			cfg.tamper = func(e *core.Entry) {
				if damaged.Load() == id {
					fork(e)
				}
			}
		})
	}
	c.propose(c.members[1], putOp("k", "v", 0))
	leader := c.members[1].Status().LeaderID
	if leader == 0 {
		t.Fatal("no leader after a write")
	}
	damaged.Store(leader)
	c.propose(c.members[1], putOp("victim", "good", 0))
	c.check(c.members[leader])
	want := []core.Alarm{{Member: leader, Type: core.AlarmCorrupt}}
	waitFor(t, "every member to list the leader's CORRUPT alarm", c.allList(want))
	ctx := context.Background()
	if _, err := c.members[leader].Read(ctx, 0); !errors.Is(err, core.ErrCorrupt) {
		t.Fatalf("damaged leader read: %v", err)
	}
	for id, m := range c.members {
		if id == leader {
			continue
		}
		res := c.propose(m, putOp("after", fmt.Sprint(id), 0))
		if res.Err != nil {
			t.Fatalf("member %d: write after the alarm: %v", id, res.Err)
		}
		v, err := m.Read(ctx, 0)
		if err != nil {
			t.Fatalf("member %d: read after the alarm: %v", id, err)
		}
		n, err := v.Node([]byte("victim"))
		v.Close()
		if err != nil || n == nil || string(n.Value) != "good" {
			t.Fatalf("member %d: victim = %+v, %v", id, n, err)
		}
	}
}

// TestCorruptObserverIsFound: observers apply the same log, take part in
// checks without voting, and are named when their state differs.
func TestCorruptObserverIsFound(t *testing.T) {
	c := newReplicaClusterWith(t, 1)
	for id := uint64(1); id <= 3; id++ {
		c.start(id, nil)
	}
	c.start(4, func(cfg *MemberConfig) { cfg.tamper = forkOn("victim") })
	c.propose(c.members[1], putOp("victim", "good", 0))
	c.check(c.members[4])
	want := []core.Alarm{{Member: 4, Type: core.AlarmCorrupt}}
	waitFor(t, "every member to list the observer's CORRUPT alarm", c.allList(want))
	if !c.members[4].Corrupt() || c.members[1].Corrupt() {
		t.Fatalf("corrupt: observer %v, voter %v", c.members[4].Corrupt(), c.members[1].Corrupt())
	}
}
