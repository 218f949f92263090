package cluster

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/testenv"
)

// The membership tests change a 3-process ensemble under the two-face
// workload (etcd puts, CAS and linearizable reads, ZooKeeper sessions,
// watches, a lock), through the real etcdctl as an operator would, and
// after the change check what every other ensemble test checks (Results.Check:
// porcupine linearizability of both faces, no acknowledged write lost,
// watches gap-free, lock tokens unique) plus that every member still in
// the ensemble holds the same history through one revision and the same
// HashKV there (checkAgreement).
//
// Node 1 (index 0) is never removed: the workload pins a watch and some
// clients to it. Removed members are stopped right after their removal
// commits, as the operator's procedure says.

// membershipRun is one membership test's ensemble and its running workload.
type membershipRun struct {
	t      *testing.T
	c      *Cluster
	res    *Results
	cancel context.CancelFunc
	ctx    context.Context // bounds the test's own calls
}

// Joining by snapshot. A member that joins on an empty disk is to catch up
// by snapshot, as in production where the log has long been trimmed: the
// leader sends one to a member missing more than --max-diff-entries, and
// before the workload starts the ensemble is given more entries than
// that. The bound is far above what a running member falls behind by in
// an election, because a member that catches up by snapshot ends its
// watches, the workload's among them (a documented limit). A voter whose
// synchronization times out while the others elect a leader without it
// has been seen 669 entries behind (the workload writes ~300 entries a
// second): the bound covers over ten seconds of that.
const (
	joinMaxDiff = 4000
	joinPrefill = 4200
)

// membershipOptions say how a membership test's ensemble starts.
type membershipOptions struct {
	// clients is how many of the three nodes the workload uses (the
	// first ones): fewer when the test restarts the others, since a
	// restarted member may catch up by snapshot and then cannot serve the
	// workload's watches from their start.
	clients int
	// joins says a member will join: the ensemble is set up so that it
	// catches up by snapshot (joinMaxDiff, joinPrefill).
	joins bool
	// args are extra flags for every member.
	args []string
	// single starts one member, with --peers naming only itself, rather
	// than three.
	single bool
}

// startMembershipRun starts a 3-process ensemble (or a single member) and
// the workload on it.
// The workload stops (and its clients are waited for) when the test ends,
// whether it passes or not.
func startMembershipRun(t *testing.T, o membershipOptions) *membershipRun {
	args := o.args
	if o.joins {
		args = append([]string{"--max-diff-entries", fmt.Sprint(joinMaxDiff)}, args...)
	}
	nodes := 3
	if o.single {
		nodes = 1
	}
	c := Start(t, Options{Binary: binary, Nodes: nodes, SelfPeer: o.single, Args: args})
	mustLeader(t, c)
	ctx, ctxCancel := context.WithTimeout(context.Background(), 5*time.Minute)
	if o.joins {
		prefill(ctx, t, c, joinPrefill)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w := Workload{EtcdEndpoints: c.EtcdEndpoints()[:o.clients], ZKServers: c.ZKServers()[:o.clients]}
	res := w.Start(wctx, t)
	t.Cleanup(func() {
		cancel()
		res.Wait()
		ctxCancel()
	})
	return &membershipRun{t: t, c: c, res: res, cancel: cancel, ctx: ctx}
}

// prefill writes n keys through the ensemble, each its own log entry,
// from a few clients at once.
func prefill(ctx context.Context, t *testing.T, c *Cluster, n int) {
	t.Helper()
	cli := etcdClient(t, c.EtcdEndpoints())
	const writers = 16
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := w; i < n; i += writers {
				if _, err := putMarker(ctx, cli, fmt.Sprintf("/prefill/%04d", i), "x"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatalf("prefill: %v", err)
		}
	}
}

// minAcks is how many definite answers of each kind the workload must
// have had before the checks (Workload.MinAcks's default).
const minAcks = 10

// refusals are etcd's errors for a change refused with nothing done,
// which the operator retries: no leader (an election after the leader was
// removed or moved), a change still pending, a learner not yet in sync.
var refusals = []string{"etcdserver: no leader", "etcdserver: unhealthy cluster", "can only promote a learner member which is in sync with leader", "etcdserver: too many requests"}

// etcdctl runs etcdctl, retrying while the ensemble refuses the command
// (see retry), and fails the test on any other error.
func (r *membershipRun) etcdctl(args ...string) string {
	r.t.Helper()
	var out string
	r.retry(func() (err error) {
		out, err = r.c.Etcdctl(r.ctx, args...)
		return err
	})
	return out
}

// retry calls f until it succeeds, while it fails with one of the
// refusals, and fails the test on any other error.
func (r *membershipRun) retry(f func() error) {
	r.t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		refused := slices.ContainsFunc(refusals, func(s string) bool { return strings.Contains(err.Error(), s) })
		if !refused || r.ctx.Err() != nil {
			r.t.Fatal(err)
		}
		r.t.Logf("refused, retrying: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// add adds a fresh node with etcdctl member add (as a learner or a
// voter), starts it with --initial-cluster-state existing on its empty data
// dir, with --id as etcdctl printed the ID (0x in front), and waits until
// it has caught up with the ensemble. It returns the node's index.
func (r *membershipRun) add(learner bool) int {
	r.t.Helper()
	n := r.c.NewNode()
	var (
		printed string
		id      uint64
	)
	r.retry(func() (err error) {
		printed, id, err = r.c.MemberAdd(r.ctx, n, "joiner-"+n.PeerAddr, learner)
		return err
	})
	r.t.Logf("etcdctl member add (learner %v) printed ID %s (%d)", learner, printed, id)
	n.ID = id
	voters, observers := r.configuration(n)
	if learner && !slices.Contains(observers, n) || !learner && !slices.Contains(voters, n) {
		r.t.Fatalf("etcdctl member list, right after member add of %s (learner %v), shows voters %v and learners %v", printed, learner, nodeIDs(voters), nodeIDs(observers))
	}
	i, err := r.c.Join(n, id, "0x"+printed, voters, observers)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("node %d joined with %v", id, n.ensemble)
	r.caughtUp(i)
	if log := tail(n.LogPath, 10000); !strings.Contains(log, "installing snapshot") {
		r.t.Errorf("node %d joined on an empty disk without a snapshot; its log:\n%s", id, tail(n.LogPath, 30))
	}
	return i
}

// configuration returns the nodes of the ensemble as member list shows
// it, voters and learners apart; joining is a node not started yet.
func (r *membershipRun) configuration(joining *Node) (voters, learners []*Node) {
	r.t.Helper()
	byID := map[uint64]*Node{joining.ID: joining}
	for _, n := range r.c.Nodes {
		byID[n.ID] = n
	}
	members, err := r.c.MemberList(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range members {
		n := byID[m.ID]
		if n == nil {
			r.t.Fatalf("member list names member %x, which this test never started: %+v", m.ID, members)
		}
		if m.IsLearner {
			learners = append(learners, n)
		} else {
			voters = append(voters, n)
		}
	}
	return voters, learners
}

func nodeIDs(nodes []*Node) []uint64 {
	var out []uint64
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	return out
}

// caughtUp waits until node i has applied a write made through the
// ensemble after it started; it must within two minutes, however loaded
// the machine.
func (r *membershipRun) caughtUp(i int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, 2*time.Minute)
	defer cancel()
	// Through the others: node i may not know the leader yet.
	others := slices.DeleteFunc(r.c.RunningEtcdEndpoints(), func(addr string) bool { return addr == r.c.Nodes[i].EtcdAddr })
	rev, err := putMarker(ctx, etcdClient(r.t, others), readyKey, "caught-up")
	if err != nil {
		r.t.Fatalf("a write through the ensemble while node %d catches up: %v", r.c.Nodes[i].ID, err)
	}
	if err := r.c.CaughtUp(ctx, i, rev); err != nil {
		r.t.Fatal(err)
	}
}

func (r *membershipRun) promote(i int) {
	r.t.Helper()
	r.etcdctl("member", "promote", hexID(r.c.Nodes[i].ID))
}

// remove removes node i with etcdctl member remove, then stops its
// process, as the procedure says.
func (r *membershipRun) remove(i int) {
	r.t.Helper()
	r.removeMember(r.c.Nodes[i].ID)
	if err := r.c.Stop(i, 30*time.Second); err != nil {
		r.t.Fatal(err)
	}
}

// removeMember runs etcdctl member remove id. An "etcdserver: leader
// changed" answer leaves the outcome unknown (the member that took the
// request may be the one removed, which loses its leader as the change
// commits); as an operator would, the test then reads member list and
// asks again only if the member is still there.
func (r *membershipRun) removeMember(id uint64) {
	r.t.Helper()
	for {
		var err error
		r.retry(func() error {
			_, err = r.c.Etcdctl(r.ctx, "member", "remove", hexID(id))
			if err != nil && strings.Contains(err.Error(), "etcdserver: leader changed") {
				return nil // decided below
			}
			return err
		})
		if err == nil {
			return
		}
		r.t.Logf("member remove %x: outcome unknown (%v); reading member list", id, err)
		var members []ListedMember
		r.retry(func() (err error) {
			members, err = r.c.MemberList(r.ctx)
			return err
		})
		if !slices.ContainsFunc(members, func(m ListedMember) bool { return m.ID == id }) {
			r.t.Logf("member %x is gone: the remove committed", id)
			return
		}
	}
}

// expectMembers checks that member list shows exactly these voters and
// learners (node indexes), asked of every running node.
func (r *membershipRun) expectMembers(voters, learners []int) {
	r.t.Helper()
	r.expectMembersAt(nil, voters, learners)
}

// expectMembersAt is expectMembers asking the given etcd endpoints only.
func (r *membershipRun) expectMembersAt(endpoints []string, voters, learners []int) {
	r.t.Helper()
	ids := func(idx []int) []uint64 {
		var out []uint64
		for _, i := range idx {
			out = append(out, r.c.Nodes[i].ID)
		}
		slices.Sort(out)
		return out
	}
	var gotV, gotL []uint64
	members, err := r.c.MemberList(r.ctx, endpoints...)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range members {
		if m.IsLearner {
			gotL = append(gotL, m.ID)
		} else {
			gotV = append(gotV, m.ID)
		}
	}
	if !slices.Equal(gotV, ids(voters)) || !slices.Equal(gotL, ids(learners)) {
		r.t.Fatalf("member list shows voters %v and learners %v, want %v and %v (%+v)", gotV, gotL, ids(voters), ids(learners), members)
	}
}

// settle waits for a leader every running member follows and for the
// workload to make progress of every kind since before.
func (r *membershipRun) settle(what string, before map[string]int) {
	r.t.Helper()
	if _, err := waitLeader(r.c); err != nil {
		r.t.Fatalf("after %s: %v", what, err)
	}
	pctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
	defer cancel()
	if err := r.res.WaitProgress(pctx, before, minPerFault); err != nil {
		r.t.Fatalf("after %s: %v", what, err)
	}
	r.t.Logf("%s: done, the workload goes on", what)
}

// finish stops the workload, once it has done enough of every kind for
// the checks to mean something (the changes can take less time than
// that), and runs every check.
func (r *membershipRun) finish() {
	r.t.Helper()
	pctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
	defer cancel()
	if err := r.res.WaitProgress(pctx, nil, minAcks); err != nil {
		r.t.Fatalf("before the checks: %v", err)
	}
	r.cancel()
	r.res.Wait()
	r.res.Check(r.t)
	checkAgreement(r.t, r.c)
}

// checkAgreement writes an end marker and checks that every running node
// holds the same history through it (each node's own watch, from revision
// 1 or, for a node that joined by snapshot, from the first revision it
// holds: the histories are compared from the latest such start) and the
// same HashKV at it.
func checkAgreement(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := etcdClient(t, c.RunningEtcdEndpoints())
	end, err := putMarker(ctx, cli, "/_membership_end", "")
	if err != nil {
		t.Fatalf("end marker: %v", err)
	}
	type held struct {
		id        uint64
		from      int64
		history   []event
		hash      uint32
		hashLabel string
	}
	var nodes []held
	from := int64(1) // the latest first revision any node holds
	for i, n := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		if err := c.CaughtUp(ctx, i, end); err != nil {
			t.Fatal(err)
		}
		h := held{id: n.ID, from: 1}
		var err error
		h.history, err = memberHistory(ctx, t, c, i, 1, end)
		var ce compactedError
		if errors.As(err, &ce) {
			// A member that compacted, or caught up by a snapshot, holds
			// history from its compact revision on (etcd's contract: the
			// first revision a watch may receive).
			h.from = ce.rev
			h.history, err = memberHistory(ctx, t, c, i, h.from, end)
		}
		if err != nil {
			t.Fatal(err)
		}
		from = max(from, h.from)
		hash, err := etcdClient(t, []string{n.EtcdAddr}).HashKV(ctx, n.EtcdAddr, end)
		if err != nil {
			t.Fatalf("node %d: HashKV at %d: %v", n.ID, end, err)
		}
		h.hash, h.hashLabel = hash.Hash, fmt.Sprintf("%d:%08x", n.ID, hash.Hash)
		nodes = append(nodes, h)
	}
	since := func(h []event) []event {
		i, _ := slices.BinarySearchFunc(h, from, func(e event, rev int64) int { return cmp.Compare(e.Rev, rev) })
		return h[i:]
	}
	var hashes []string
	for _, h := range nodes {
		hashes = append(hashes, h.hashLabel)
	}
	first := since(nodes[0].history)
	for _, h := range nodes[1:] {
		if err := compareHistories(first, since(h.history)); err != nil {
			t.Errorf("nodes %d and %d hold different histories from revision %d through %d: %v", nodes[0].id, h.id, from, end, err)
		}
		if h.hash != nodes[0].hash {
			t.Errorf("HashKV at %d differs: %v", end, hashes)
		}
	}
	t.Logf("every running member holds the same %d events from revision %d through %d; HashKV %v", len(first), from, end, hashes)
}

// TestClusterMemberAddPromoteRemove is an operator's learner procedure
// under load: etcdctl member add --learner, the new process started with
// --initial-cluster-state existing on an empty data dir (it catches up by
// snapshot, the ensemble having written since), etcdctl member promote,
// then etcdctl member remove of an original member (node 3) and its stop.
func TestClusterMemberAddPromoteRemove(t *testing.T) {
	r := startMembershipRun(t, membershipOptions{clients: 3, joins: true})
	before := r.res.Acks()
	n4 := r.add(true)
	r.expectMembers([]int{0, 1, 2}, []int{n4})
	r.settle("member add --learner and its start", before)

	before = r.res.Acks()
	r.promote(n4)
	r.expectMembers([]int{0, 1, 2, n4}, nil)
	r.settle("member promote", before)

	before = r.res.Acks()
	if l, err := r.c.Leader(r.ctx); err == nil && l == 2 {
		t.Logf("node 3, which is removed next, leads")
	}
	r.remove(2)
	r.expectMembers([]int{0, 1, n4}, nil)
	r.settle("member remove of node 3", before)
	r.finish()
}

// TestClusterSingleMemberGrows grows a single member started with --peers
// naming only itself to three voters under load, as the README says an
// operator does: each new member added as a learner, started on an empty
// disk (it catches up by snapshot) and promoted.
func TestClusterSingleMemberGrows(t *testing.T) {
	r := startMembershipRun(t, membershipOptions{single: true, clients: 1, joins: true})
	for range 2 {
		before := r.res.Acks()
		i := r.add(true)
		r.promote(i)
		r.settle(fmt.Sprintf("node %d added and promoted", r.c.Nodes[i].ID), before)
	}
	r.expectMembers([]int{0, 1, 2}, nil)
	r.finish()
}

// TestClusterGrowAndShrink grows the ensemble from 3 to 5 voters (two
// learners added, started and promoted) and back to 3 under load: the
// leadership is moved to node 3, which is then removed while it leads, and
// node 4 after it. Node 3 is restarted in the 5-member ensemble with its
// original --peers (nodes 1-3), and node 5, in the shrunk ensemble, with
// the flags it joined with (nodes 1-4, itself an observer): both stale,
// and in both the configuration the member stored wins. The workload uses
// nodes 1 and 2 only, which are never restarted: a restarted member may
// catch up by snapshot and then cannot serve the workload's watches from
// their start.
func TestClusterGrowAndShrink(t *testing.T) {
	r := startMembershipRun(t, membershipOptions{clients: 2, joins: true})
	var added []int
	for range 2 {
		before := r.res.Acks()
		i := r.add(true)
		r.promote(i)
		added = append(added, i)
		r.settle(fmt.Sprintf("node %d added and promoted", r.c.Nodes[i].ID), before)
	}
	r.expectMembers([]int{0, 1, 2, added[0], added[1]}, nil)

	before := r.res.Acks()
	r.restartStale(2, []int{0, 1, 2, added[0], added[1]}, nil)
	r.settle("restart of node 3 with stale --peers in the 5-member ensemble", before)

	before = r.res.Acks()
	r.moveLeader(2)
	r.settle("move-leader to node 3", before)
	for _, i := range []int{2, added[0]} {
		before := r.res.Acks()
		id := r.c.Nodes[i].ID
		r.remove(i)
		r.settle(fmt.Sprintf("member remove of node %d", id), before)
	}
	r.expectMembers([]int{0, 1, added[1]}, nil)

	before = r.res.Acks()
	r.restartStale(added[1], []int{0, 1, added[1]}, nil)
	r.settle("restart of node 5 with stale flags in the shrunk ensemble", before)
	r.finish()
}

// moveLeader moves the leadership to node i with etcdctl move-leader,
// which returns once node i leads, and checks that node i leads.
func (r *membershipRun) moveLeader(i int) {
	r.t.Helper()
	id := r.c.Nodes[i].ID
	r.etcdctl("move-leader", hexID(id))
	l, err := r.c.Leader(r.ctx)
	if err != nil || l != i {
		r.t.Fatalf("after move-leader %x: the leader is node index %d (%v), want node %d", id, l, err, id)
	}
}

// restartStale restarts node i (SIGTERM, start) with the flags it was
// first started with, whose --peers no longer name the ensemble, and
// checks that the configuration it stored wins: it starts with the
// ensemble's voters (its log says, before any leader could have told it)
// and lists the ensemble as it is (voters and learners, node indexes).
func (r *membershipRun) restartStale(i int, voters, learners []int) {
	r.t.Helper()
	if err := r.c.Stop(i, 30*time.Second); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.Restart(i); err != nil {
		r.t.Fatal(err)
	}
	var ids []uint64
	for _, v := range voters {
		ids = append(ids, r.c.Nodes[v].ID)
	}
	slices.Sort(ids)
	want := fmt.Sprintf("voters=%v", ids)
	if got := startedWith(r.c.Nodes[i].LogPath); !strings.Contains(got, want) {
		r.t.Errorf("node %d restarted with stale flags started with configuration %q, want %s", r.c.Nodes[i].ID, got, want)
	}
	r.caughtUp(i)
	r.expectMembersAt([]string{r.c.Nodes[i].EtcdAddr}, voters, learners)
}

// startedWith returns the configuration the last start in a node's log
// began with (zab's "zab member started" record).
func startedWith(logPath string) string {
	starts := zabStarts(logPath)
	if len(starts) == 0 {
		return ""
	}
	return starts[len(starts)-1].Membership
}

// zabStart is zab's "zab member started" record: the configuration a
// start began with and whether the member was joining a running ensemble.
type zabStart struct {
	Msg        string `json:"msg"`
	Membership string `json:"membership"`
	Joining    bool   `json:"joining"`
}

// zabStarts returns every start recorded in a node's log, in order.
func zabStarts(logPath string) []zabStart {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	var out []zabStart
	for _, l := range strings.Split(string(b), "\n") {
		var rec zabStart
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "zab member started" {
			out = append(out, rec)
		}
	}
	return out
}

// TestClusterReplaceKilledMember replaces a member lost with its disk:
// node 3 is killed with SIGKILL, removed with etcdctl member remove while
// it is down, and a fresh member is added as a voter (etcd's procedure)
// and started on an empty data dir, all under load.
func TestClusterReplaceKilledMember(t *testing.T) {
	r := startMembershipRun(t, membershipOptions{clients: 3, joins: true})
	before := r.res.Acks()
	r.c.Kill(2)
	r.settle("SIGKILL of node 3", before)

	before = r.res.Acks()
	r.removeMember(r.c.Nodes[2].ID)
	r.expectMembers([]int{0, 1}, nil)
	r.settle("member remove of the dead node 3", before)

	before = r.res.Acks()
	n := r.add(false)
	r.expectMembers([]int{0, 1, n}, nil)
	r.settle("a fresh member added and started", before)
	r.finish()
}

// TestClusterMoveLeader moves the leadership to each voter in turn with
// etcdctl move-leader under load, the first leader last.
func TestClusterMoveLeader(t *testing.T) {
	r := startMembershipRun(t, membershipOptions{clients: 3})
	first, err := r.c.Leader(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	for i := range r.c.Nodes {
		if i != first {
			order = append(order, i)
		}
	}
	order = append(order, first)
	for _, i := range order {
		before := r.res.Acks()
		r.moveLeader(i)
		r.settle(fmt.Sprintf("move-leader to node %d", r.c.Nodes[i].ID), before)
	}
	r.finish()
}

// TestClusterReplaceKilledMemberZooKeeper is the ZooKeeper way of
// replacing a lost member, under load, with the real zkCli.sh: node 3 is
// killed with SIGKILL, reconfig -remove 3 while it is down, the
// replacement (an ID never named before, as the README says) added as an
// observer with reconfig -add, started on an empty data dir with
// --initial-cluster-state existing, and made a participant with a second
// reconfig -add once it has caught up.
func TestClusterReplaceKilledMemberZooKeeper(t *testing.T) {
	r, _ := startZKReplaceRun(t)

	before := r.res.Acks()
	n := r.c.NewNode()
	n.ID = 4
	observer := fmt.Sprintf("server.4=%s:3888:observer;%s", n.PeerAddr, n.ZKAddr)
	r.zkReconfig("-add " + observer)
	i, err := r.c.Join(n, 4, "4", []*Node{r.c.Nodes[0], r.c.Nodes[1]}, []*Node{n})
	if err != nil {
		t.Fatal(err)
	}
	r.caughtUp(i)
	r.expectMembers([]int{0, 1}, []int{i})
	r.zkReconfig("-add " + strings.Replace(observer, ":observer;", ":participant;", 1))
	r.expectMembers([]int{0, 1, i}, nil)
	r.settle("a fresh member added as an observer, started, made a participant", before)
	r.finish()
}

// TestClusterReplaceKilledMemberZooKeeperFiles replaces a killed member
// as ZooKeeper's own procedure does, under load: zkCli.sh reconfig
// -remove, then a new server started from a zoo.cfg whose dynamic file
// is the running ensemble's configuration (zkCli.sh config, with its
// version= line) plus its own line, and only then reconfig -add, first as
// an observer, then as a participant. The new server, with no state,
// joins as --initial-cluster-state existing makes it.
func TestClusterReplaceKilledMemberZooKeeperFiles(t *testing.T) {
	r, super := startZKReplaceRun(t)

	before := r.res.Acks()
	config, stat, err := super.Get("/zookeeper/config")
	if err != nil {
		t.Fatalf("get /zookeeper/config: %v", err)
	}
	if !strings.Contains(string(config), "\nversion=") || stat.Mtime == 0 {
		t.Fatalf("/zookeeper/config after a reconfig: %q, mtime %d", config, stat.Mtime)
	}
	n := r.c.NewNode()
	i, err := r.c.JoinZooCfg(n, 4, string(config), true)
	if err != nil {
		t.Fatal(err)
	}
	if starts := zabStarts(n.LogPath); len(starts) == 0 || !starts[0].Joining {
		t.Fatalf("node 4, started from a running ensemble's dynamic file on an empty data dir, did not start joining: %+v", starts)
	}
	observer := fmt.Sprintf("server.4=%s:3888:observer;%s", n.PeerAddr, n.ZKAddr)
	r.zkReconfig("-add " + observer)
	r.caughtUp(i)
	r.expectMembers([]int{0, 1}, []int{i})
	r.zkReconfig("-add " + strings.Replace(observer, ":observer;", ":participant;", 1))
	r.expectMembers([]int{0, 1, i}, nil)
	r.settle("a fresh member started from zoo.cfg and a dynamic file, added as an observer, made a participant", before)
	r.finish()
}

// zkRefusals are how zkCli.sh prints a reconfig the ensemble refused for
// now: NewConfigNoQuorum (an observer made participant before it caught
// up), ReconfigInProgress, a connection lost to an election.
var zkRefusals = []string{"No quorum of new config is connected and up-to-date", "NewConfigNoQuorum", "ReconfigInProgress", "Another reconfiguration is in progress", "ConnectionLoss"}

// zkReconfig runs zkCli.sh reconfig with args against node 1 until it
// answers "Committed new configuration", while the ensemble refuses for
// now (no quorum of the new configuration yet, another change in
// progress, a connection lost to an election).
func (r *membershipRun) zkReconfig(args string) {
	r.t.Helper()
	for {
		out := testenv.ZkCli(r.t, r.c.Nodes[0].ZKAddr, "reconfig "+args)
		if strings.Contains(out, "Committed new configuration") {
			r.t.Logf("zkCli.sh reconfig %s: %s", args, strings.ReplaceAll(out, "\n", " | "))
			return
		}
		refused := slices.ContainsFunc(zkRefusals, func(s string) bool { return strings.Contains(out, s) })
		if !refused || r.ctx.Err() != nil {
			r.t.Fatalf("zkCli.sh reconfig %s:\n%s", args, out)
		}
		r.t.Logf("zkCli.sh reconfig %s refused, retrying: %s", args, out)
		time.Sleep(200 * time.Millisecond)
	}
}

// startZKReplaceRun starts the ZooKeeper-way replacement tests: a run
// with reconfig on and a super user, WRITE on /zookeeper/config granted
// to everyone (only a super user, or one granted WRITE, may reconfigure,
// and zkCli.sh runs a session per command), node 3 killed with SIGKILL
// and removed with reconfig -remove 3. It returns the run and the super
// user's session.
func startZKReplaceRun(t *testing.T) (*membershipRun, *zk.Conn) {
	t.Helper()
	const password = "membership-super"
	sum := sha1.Sum([]byte("super:" + password))
	digest := "super:" + base64.StdEncoding.EncodeToString(sum[:])
	r := startMembershipRun(t, membershipOptions{clients: 3, joins: true, args: []string{"--zk-reconfig-enabled", "--zk-super-digest", digest}})
	super := zkConn(t, r.c.ZKServers()[:2])
	if err := super.AddAuth("digest", []byte("super:"+password)); err != nil {
		t.Fatal(err)
	}
	if _, err := super.SetACL("/zookeeper/config", zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatalf("grant WRITE on /zookeeper/config: %v", err)
	}

	before := r.res.Acks()
	r.c.Kill(2)
	r.settle("SIGKILL of node 3", before)

	before = r.res.Acks()
	r.zkReconfig("-remove 3")
	r.expectMembers([]int{0, 1}, nil)
	r.settle("reconfig -remove 3", before)
	return r, super
}
