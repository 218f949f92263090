package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/testenv"
)

// failoverBase is the subtree the failover test's clients work in.
const failoverBase = "/failover"

// failoverRounds is how many leader failovers TestSessionsSurviveLeaderFailover
// runs (default 4: two kills, two pauses); $JANUS_FAILOVER_ROUNDS sets it.
func failoverRounds(t *testing.T) int {
	if s := os.Getenv("JANUS_FAILOVER_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("JANUS_FAILOVER_ROUNDS=%q: want a positive number", s)
		}
		return n
	}
	return 4
}

// TestSessionsSurviveLeaderFailover: ZooKeeper sessions of kazoo, Curator
// and go-zookeeper clients (4-6 s timeouts) holding ephemerals, a kazoo
// Lock and a Curator LeaderLatch, and an etcd lease holding keys, all
// outlive leader failovers: the leader is alternately killed (SIGKILL,
// then restarted) and paused (SIGSTOP until the others have elected a new
// leader, which takes longer than the election timeout, capped below the
// shortest session timeout; then SIGCONT). Every client keeps working
// throughout, and before each next fault the test waits until every one
// has made progress again. No session may expire, no acknowledged
// ephemeral may go, the lock and the leadership may never be lost or
// held twice, and the lease must keep its keys.
//
// Nothing is random: faults alternate kill, pause, kill, ... and always
// hit the current leader.
func TestSessionsSurviveLeaderFailover(t *testing.T) {
	rounds := failoverRounds(t)
	script, err := os.ReadFile(filepath.Join("testdata", "failover_kazoo.py"))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	c := Start(t, Options{Binary: binary, Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: c.EtcdEndpoints(), DialTimeout: 5 * time.Second, Logger: nopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()

	servers := strings.Join(c.ZKServers(), ",")
	kazoo := startReporter(t, "kazoo", testenv.PythonCommand(ctx, t, string(script), servers, "5", failoverBase))
	curator := startReporter(t, "curator", testenv.JavaCommand(ctx, t, filepath.Join("testdata", "FailoverSessions.java"), "FailoverSessions", servers, "6000", failoverBase))
	gozk := []*goZKSession{
		startGoZKSession(t, "a", c.ZKServers(), 4*time.Second),
		startGoZKSession(t, "b", c.ZKServers(), 4*time.Second),
	}
	lease := startEtcdLease(ctx, t, etcd, 5)
	defer func() {
		for _, s := range gozk {
			s.stop()
		}
		lease.stop()
	}()

	// The external clients say they are ready by creating a node; as
	// every ZooKeeper path is an etcd key, the test reads it through etcd.
	for _, name := range []string{"kazoo", "curator"} {
		waitFor(ctx, t, name+" ready", func() bool {
			r, err := etcd.Get(ctx, failoverBase+"/ready/"+name)
			return err == nil && len(r.Kvs) == 1
		}, kazoo, curator)
	}

	var kills, pauses int
	for round := range rounds {
		leader, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mark := clientMarks(ctx, t, etcd, gozk, lease)
		if round%2 == 0 {
			kills++
			t.Logf("round %d: SIGKILL the leader, node %d", round, c.Nodes[leader].ID)
			c.Kill(leader)
			if _, err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Restart(leader); err != nil {
				t.Fatal(err)
			}
		} else {
			pauses++
			t.Logf("round %d: SIGSTOP the leader, node %d", round, c.Nodes[leader].ID)
			paused := time.Now()
			c.Pause(leader)
			// Longer than the election timeout by construction: the others
			// elect only after not hearing the leader for that long. At
			// most 3 s, below the shortest session timeout (4 s).
			next, err := c.leaderExcept(ctx, leader, 3*time.Second)
			c.Resume(leader)
			if err != nil {
				t.Logf("round %d: no new leader while paused (%v); resumed after %v", round, err, time.Since(paused).Round(time.Millisecond))
			} else {
				t.Logf("round %d: node %d leads; resumed node %d after %v", round, c.Nodes[next].ID, c.Nodes[leader].ID, time.Since(paused).Round(time.Millisecond))
			}
		}
		if _, err := c.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		// A minute is far more than any client needs to come back; the
		// bound only turns a client that never does into a failure.
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		waitClientsProgress(pctx, t, etcd, mark, gozk, lease, kazoo, curator)
		cancel()
	}

	if _, err := etcd.Put(ctx, failoverBase+"/done", "1"); err != nil {
		t.Fatal(err)
	}
	reports := map[string]clientReport{"kazoo": kazoo.wait(t), "curator": curator.wait(t)}
	for _, s := range gozk {
		reports["go-zookeeper "+s.name] = s.finish(ctx, t)
	}
	leaseReport := lease.finish(ctx, t, etcd)

	var sessions, expired, ephemerals int
	var longest time.Duration
	for name, r := range reports {
		sessions += len(r.Sessions)
		expired += r.Expired
		ephemerals += r.Ephemerals
		longest = max(longest, time.Duration(r.MaxReattachMs)*time.Millisecond)
		t.Logf("%s: sessions %v, expired %d, ephemerals %d, missing %d, longest re-attach %dms, %d transient errors, states %v",
			name, r.Sessions, r.Expired, r.Ephemerals, len(r.Missing), r.MaxReattachMs, len(r.Errors), r.States)
		if len(r.Errors) > 5 {
			r.Errors = r.Errors[:5]
		}
		if r.Expired != 0 {
			t.Errorf("%s: %d sessions expired", name, r.Expired)
		}
		if len(r.Missing) != 0 {
			t.Errorf("%s: %d acknowledged ephemerals missing or not their session's: %v", name, len(r.Missing), r.Missing)
		}
		if r.SameSessions != nil && !*r.SameSessions {
			t.Errorf("%s: a client ended on another session than it started with", name)
		}
		// The in-process sessions are still open: each must be a live
		// lease on the ensemble. (The programs closed theirs on exit;
		// they checked their ephemerals' owner against the session they
		// started with instead.)
		if r.Client != "go-zookeeper" {
			continue
		}
		for _, sid := range r.Sessions {
			id, err := strconv.ParseInt(strings.TrimPrefix(sid, "0x"), 16, 64)
			if err != nil {
				t.Fatalf("%s: session id %q: %v", name, sid, err)
			}
			ttl, err := etcd.TimeToLive(ctx, clientv3.LeaseID(id))
			if err != nil || ttl.TTL <= 0 {
				t.Errorf("%s: session %s is no longer a live lease: %v %v", name, sid, ttl, err)
			}
		}
	}
	k := reports["kazoo"]
	if k.LockDoubled || !k.LockHeldAtEnd || !k.ContenderGotLock {
		t.Errorf("kazoo lock: doubled %v, held by its first owner at the end %v, contender got it after the release %v",
			k.LockDoubled, k.LockHeldAtEnd, k.ContenderGotLock)
	}
	cu := reports["curator"]
	if cu.LeadershipLost != 0 || cu.MaxLeaders != 1 || cu.LeadingAtEnd != 1 || cu.LeaderAtStart != cu.LeaderAtEnd {
		t.Errorf("curator latch: leadership lost %d times, at most %d leaders at once, %d leading at the end, leader %q at the start and %q at the end",
			cu.LeadershipLost, cu.MaxLeaders, cu.LeadingAtEnd, cu.LeaderAtStart, cu.LeaderAtEnd)
	}
	if leaseReport.lost {
		t.Errorf("etcd lease: the client gave up its keep-alive (no answer within the TTL, or TTL 0)")
	}
	// What the servers told clients, from their logs.
	var refused int
	for _, n := range c.Nodes {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		refused += bytes.Count(b, []byte("session re-attach refused: expired"))
		// The message in slog's JSON (the default) and text formats.
		refused += bytes.Count(b, []byte(`"msg":"session expired"`))
		refused += bytes.Count(b, []byte(`msg="session expired"`))
	}
	if refused != 0 {
		t.Errorf("the servers logged %d session expiries or re-attaches answered session-expired", refused)
	}
	t.Logf("failovers: %d (%d SIGKILL, %d SIGSTOP); ZooKeeper sessions tracked: %d, expired: %d; acknowledged ephemeral-sequential nodes: %d; "+
		"etcd lease keys: %d, keep-alive answers: %d, longest keep-alive gap: %v; longest ZooKeeper re-attach: %v; expiries in server logs: %d; wall time %v",
		rounds, kills, pauses, sessions, expired, ephemerals, leaseReport.keys, leaseReport.answers, leaseReport.longestGap.Round(time.Millisecond),
		longest, refused, time.Since(started).Round(time.Millisecond))
}

// clientReport is what each client says at the end; fields a client does
// not report stay zero.
type clientReport struct {
	Client           string   `json:"client"`
	Sessions         []string `json:"sessions"`
	Expired          int      `json:"expired"`
	SameSessions     *bool    `json:"same_sessions"`
	States           []string `json:"states"`
	MaxReattachMs    int64    `json:"max_reattach_ms"`
	Ephemerals       int      `json:"ephemerals"`
	Missing          []string `json:"missing"`
	Errors           []string `json:"errors"`
	LockDoubled      bool     `json:"lock_doubled"`
	LockHeldAtEnd    bool     `json:"lock_held_at_end"`
	ContenderGotLock bool     `json:"contender_got_lock_after_release"`
	LeadingAtEnd     int      `json:"leading_at_end"`
	LeaderAtStart    string   `json:"leader_at_start"`
	LeaderAtEnd      string   `json:"leader_at_end"`
	MaxLeaders       int      `json:"max_leaders"`
	LeadershipLost   int      `json:"leadership_lost"`
}

// reporter is a client program running beside the test; it prints one
// "REPORT {json}" line when it ends.
type reporter struct {
	name   string
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

func startReporter(t *testing.T, name string, cmd *exec.Cmd) *reporter {
	t.Helper()
	r := &reporter{name: name, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(r.done)
		r.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		<-r.done // ctx (the test's) ends the program if it is still running
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, lastLines(r.stderr.String(), 40))
		}
	})
	return r
}

// exited returns the program's failure if it has ended before it should.
func (r *reporter) exited() error {
	select {
	case <-r.done:
		return fmt.Errorf("%s exited early: %v\nstdout:\n%s\nstderr:\n%s", r.name, r.err, r.stdout.String(), lastLines(r.stderr.String(), 40))
	default:
		return nil
	}
}

func (r *reporter) wait(t *testing.T) clientReport {
	t.Helper()
	<-r.done
	if r.err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", r.name, r.err, r.stdout.String(), lastLines(r.stderr.String(), 60))
	}
	sc := bufio.NewScanner(bytes.NewReader(r.stdout.Bytes()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "REPORT "); ok {
			var rep clientReport
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				t.Fatalf("%s report: %v\n%s", r.name, err, line)
			}
			return rep
		}
	}
	t.Fatalf("%s printed no report:\n%s", r.name, r.stdout.String())
	return clientReport{}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// waitFor polls cond until it holds, failing the test when ctx ends or a
// client program has exited.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool, programs ...*reporter) {
	t.Helper()
	for !cond() {
		for _, p := range programs {
			if err := p.exited(); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// progressMarks is where every client stood before a fault.
type progressMarks struct {
	rev   map[string]int64 // progress node's mod revision, by program
	gozk  []int64
	lease int64
}

func progressRev(ctx context.Context, etcd *clientv3.Client, name string) (int64, error) {
	r, err := etcd.Get(ctx, failoverBase+"/progress/"+name)
	if err != nil {
		return 0, err
	}
	if len(r.Kvs) == 0 {
		return 0, nil
	}
	return r.Kvs[0].ModRevision, nil
}

func clientMarks(ctx context.Context, t *testing.T, etcd *clientv3.Client, gozk []*goZKSession, lease *etcdLease) progressMarks {
	t.Helper()
	m := progressMarks{rev: map[string]int64{}, lease: lease.answers.Load()}
	for _, name := range []string{"kazoo", "curator"} {
		rev, err := progressRev(ctx, etcd, name)
		if err != nil {
			t.Fatal(err)
		}
		m.rev[name] = rev
	}
	for _, s := range gozk {
		m.gozk = append(m.gozk, s.ops.Load())
	}
	return m
}

// waitClientsProgress waits until every client has done something since mark:
// each has re-attached and works again before the next fault.
func waitClientsProgress(ctx context.Context, t *testing.T, etcd *clientv3.Client, mark progressMarks, gozk []*goZKSession, lease *etcdLease, programs ...*reporter) {
	t.Helper()
	for name, rev := range mark.rev {
		waitFor(ctx, t, name+" progress", func() bool {
			now, err := progressRev(ctx, etcd, name)
			return err == nil && now > rev
		}, programs...)
	}
	for i, s := range gozk {
		waitFor(ctx, t, "go-zookeeper "+s.name+" progress", func() bool { return s.ops.Load() > mark.gozk[i] }, programs...)
	}
	waitFor(ctx, t, "etcd keep-alive progress", func() bool {
		lease.mu.Lock()
		lost := lease.lost
		lease.mu.Unlock()
		if lost {
			ttl, err := etcd.TimeToLive(ctx, lease.id)
			t.Fatalf("etcd lease %x: clientv3 gave up its keep-alive after %d answers (longest gap %v); the ensemble says TTL %v (%v)",
				lease.id, lease.answers.Load(), lease.longestGap, ttl, err)
		}
		return lease.answers.Load() > mark.lease
	}, programs...)
}

// leaderExcept waits until a node other than skip reports itself leader,
// for at most limit.
func (c *Cluster) leaderExcept(ctx context.Context, skip int, limit time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		for i, n := range c.Nodes {
			if i == skip || !c.Running(i) {
				continue
			}
			if c.reportsLeader(ctx, n) {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) reportsLeader(ctx context.Context, n *Node) bool {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.EtcdAddr}, DialTimeout: time.Second, Logger: nopLogger()})
	if err != nil {
		return false
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := cli.Status(sctx, n.EtcdAddr)
	return err == nil && resp.Leader == n.ID && resp.Header.MemberId == n.ID
}

// goZKSession is a go-zookeeper session that keeps creating
// ephemeral-sequential nodes, setting its own ephemeral and reading it
// after sync, and records the session states it sees.
type goZKSession struct {
	name string
	conn *zk.Conn
	sid  int64
	ops  atomic.Int64

	halt       chan struct{}
	haltOnce   sync.Once
	workDone   chan struct{}
	eventsDone chan struct{}

	mu           sync.Mutex
	states       []string
	expired      int
	disconnected time.Time
	longest      time.Duration
	created      []string
	errs         []string
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func startGoZKSession(t *testing.T, name string, servers []string, timeout time.Duration) *goZKSession {
	t.Helper()
	conn, events, err := zk.Connect(servers, timeout, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	s := &goZKSession{name: name, conn: conn, halt: make(chan struct{}), workDone: make(chan struct{}), eventsDone: make(chan struct{})}
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	s.sid = conn.SessionID()
	go func() {
		defer close(s.eventsDone)
		for ev := range events {
			s.observe(ev)
		}
	}()
	mine := fmt.Sprintf("%s/eph/gozk-%s", failoverBase, name)
	for _, p := range []string{failoverBase, failoverBase + "/eph", failoverBase + "/seq"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := conn.Create(mine, []byte("0"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.workDone)
		s.work(mine)
	}()
	return s
}

func (s *goZKSession) observe(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.states); n == 0 || s.states[n-1] != ev.State.String() {
		s.states = append(s.states, ev.State.String())
	}
	switch ev.State {
	case zk.StateExpired:
		s.expired++
	case zk.StateDisconnected:
		if s.disconnected.IsZero() {
			s.disconnected = time.Now()
		}
	case zk.StateHasSession:
		if !s.disconnected.IsZero() {
			s.longest = max(s.longest, time.Since(s.disconnected))
			s.disconnected = time.Time{}
		}
	}
}

func (s *goZKSession) work(mine string) {
	acl := zk.WorldACL(zk.PermAll)
	for n := 1; ; n++ {
		select {
		case <-s.halt:
			return
		default:
		}
		err := func() error {
			p, err := s.conn.Create(fmt.Sprintf("%s/seq/gozk-%s-", failoverBase, s.name), []byte("x"), zk.FlagEphemeral|zk.FlagSequence, acl)
			if err != nil {
				return err
			}
			s.mu.Lock()
			s.created = append(s.created, p)
			s.mu.Unlock()
			_, st, err := s.conn.Get(mine)
			if err != nil {
				return err
			}
			// A versioned write: nobody else writes this node.
			if _, err := s.conn.Set(mine, []byte(strconv.Itoa(n)), st.Version); err != nil {
				return err
			}
			if _, err := s.conn.Sync(mine); err != nil {
				return err
			}
			_, _, err = s.conn.Get(mine)
			return err
		}()
		if err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err.Error())
			s.mu.Unlock()
			select {
			case <-s.halt:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.ops.Add(1)
	}
}

func (s *goZKSession) stop() {
	s.haltOnce.Do(func() { close(s.halt) })
	<-s.workDone
	s.conn.Close() // ends the event loop
	<-s.eventsDone
}

// finish stops the work and checks every acknowledged ephemeral.
func (s *goZKSession) finish(ctx context.Context, t *testing.T) clientReport {
	t.Helper()
	s.haltOnce.Do(func() { close(s.halt) })
	<-s.workDone
	r := clientReport{Client: "go-zookeeper", Sessions: []string{fmt.Sprintf("0x%x", s.sid)}}
	s.mu.Lock()
	created := append([]string(nil), s.created...)
	r.Expired, r.States, r.MaxReattachMs, r.Errors = s.expired, append([]string(nil), s.states...), s.longest.Milliseconds(), s.errs
	s.mu.Unlock()
	same := s.conn.SessionID() == s.sid
	r.SameSessions = &same
	r.Ephemerals = len(created)
	for _, p := range created {
		var st *zk.Stat
		var err error
		for ctx.Err() == nil {
			if _, st, err = s.conn.Exists(p); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st == nil || st.EphemeralOwner != s.sid {
			r.Missing = append(r.Missing, p)
		}
	}
	return r
}

// etcdLease is an etcd lease with keys, kept alive by clientv3.
type etcdLease struct {
	id      clientv3.LeaseID
	keys    int
	answers atomic.Int64
	cancel  context.CancelFunc
	done    chan struct{}

	mu         sync.Mutex
	lost       bool
	longestGap time.Duration
}

func startEtcdLease(ctx context.Context, t *testing.T, etcd *clientv3.Client, ttl int64) *etcdLease {
	t.Helper()
	g, err := etcd.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	l := &etcdLease{id: g.ID, keys: 3, done: make(chan struct{})}
	for i := range l.keys {
		if _, err := etcd.Put(ctx, fmt.Sprintf("%s/lease/k%d", failoverBase, i), "v", clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
	}
	kctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	ch, err := etcd.KeepAlive(kctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(l.done)
		last := time.Now()
		for range ch {
			l.answers.Add(1)
			l.mu.Lock()
			l.longestGap = max(l.longestGap, time.Since(last))
			l.mu.Unlock()
			last = time.Now()
		}
		// The channel closes when the client gives the lease up (an
		// answer with TTL 0, or none within the TTL), or when stopped.
		if kctx.Err() == nil {
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *etcdLease) stop() {
	l.cancel()
	<-l.done
}

type leaseReport struct {
	lost       bool
	keys       int
	answers    int64
	longestGap time.Duration
}

// finish checks the lease still holds its keys, then stops keeping it.
func (l *etcdLease) finish(ctx context.Context, t *testing.T, etcd *clientv3.Client) leaseReport {
	t.Helper()
	ttl, err := etcd.TimeToLive(ctx, l.id, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL <= 0 || len(ttl.Keys) != l.keys {
		t.Errorf("etcd lease %x: TTL %d, %d keys, want it alive with %d", l.id, ttl.TTL, len(ttl.Keys), l.keys)
	}
	l.mu.Lock()
	r := leaseReport{lost: l.lost, keys: len(ttl.Keys), answers: l.answers.Load(), longestGap: l.longestGap}
	l.mu.Unlock()
	return r
}
