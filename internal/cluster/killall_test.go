package cluster

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/januskv/janus/internal/linearize"
)

// killAllKinds are the operations killLoad counts; each must make progress
// after every power cut and over the run.
var killAllKinds = []string{"put", "txn", "get", "delete", "lease grant", "lease put", "lease revoke", "lock hold"}

// TestClusterKillAll cuts the power of the whole ensemble: rounds of
// SIGKILL to all three members at once under a write load (puts, Txns of
// many large puts, deletes, lease grant/attach/revoke, lock acquisitions
// with fenced writes), each
// followed by a restart of all three. After each round the load must make
// progress of every kind. At the end every member must hold the same
// history at every revision (each member's own watch from revision 1), no
// client may have seen the revision go back, fencing tokens must increase
// in commit order, no acknowledged write or delete may be lost, and
// HashKV at one revision must agree on every member.
//
// make test runs a few rounds; make chaos repeats them for
// $JANUS_CHAOS_DURATION. $JANUS_CLUSTER_SEED replays a logged seed (the
// kill timing and order, and every client's choices).
func TestClusterKillAll(t *testing.T) {
	seed := seed(t, "JANUS_CLUSTER_SEED")
	t.Logf("kill-all seed %d (replay with JANUS_CLUSTER_SEED=%d)", seed, seed)
	c := Start(t, Options{Binary: binary, Nodes: 3})
	mustLeader(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	load := &killLoad{seed: seed, acks: map[string]int{}, failures: map[string]int{},
		puts: map[string]ackedPut{}, deletes: map[string]int64{}, uncertain: map[string]bool{},
		revoked: map[string]int64{}, revs: map[int][]int64{}}
	load.start(ctx, t, c.EtcdEndpoints())
	defer load.wg.Wait()
	defer cancel()

	rounds := 3
	end := time.Now().Add(chaosDuration(t))
	faultErr := make(chan error, 1)
	go func() {
		defer cancel()
		rng := rand.New(rand.NewPCG(seed, 0))
		for round := 0; round < rounds || time.Now().Before(end); round++ {
			pause(ctx, time.Duration(500+rng.IntN(2000))*time.Millisecond)
			order := rng.Perm(len(c.Nodes))
			c.KillAll(order)
			before := load.snapshot()
			for _, i := range rng.Perm(len(c.Nodes)) {
				if err := c.Restart(i); err != nil {
					faultErr <- fmt.Errorf("round %d: %w", round, err)
					return
				}
			}
			if _, err := waitLeader(c); err != nil {
				faultErr <- fmt.Errorf("round %d: after restarting every member: %w", round, err)
				return
			}
			pctx, pcancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := waitProgress(pctx, killAllKinds, load.snapshot, before, minPerFault)
			pcancel()
			if err != nil {
				faultErr <- fmt.Errorf("round %d: after restarting every member: %w", round, err)
				return
			}
			t.Logf("kill-all round %d done (kill order %v)", round, order)
		}
		faultErr <- nil
	}()
	load.wg.Wait()
	if err := <-faultErr; err != nil {
		t.Fatal(err)
	}
	load.check(t, c)
}

// ackedPut is a put the cluster acknowledged: its value and the revision
// of its response.
type ackedPut struct {
	Value string
	Rev   int64
}

// killLoad is TestClusterKillAll's write load and what its clients were
// told. Keys under /ka/w/ are written once and maybe deleted once, keys
// under /ka/l/ are attached to a lease that is then revoked, and
// /ka/fence is written by lock holders only, through a Txn guarded by
// their ownership of the lock.
type killLoad struct {
	seed uint64
	wg   sync.WaitGroup

	mu        sync.Mutex
	acks      map[string]int // definite answers per kind
	failures  map[string]int
	puts      map[string]ackedPut // every acknowledged put of a /ka/w/ or /ka/l/ key
	deletes   map[string]int64    // /ka/w/ key -> revision its delete was acknowledged at
	uncertain map[string]bool     // /ka/w/ keys whose delete's outcome is unknown
	revoked   map[string]int64    // /ka/l/ key -> revision its lease's revoke was acknowledged at
	fences    []ackedPut          // acknowledged fenced writes (Value: the holder's lock key)
	holds     []linearize.LockHold
	revs      map[int][]int64 // per client, header revisions of its successful responses
	clock     *linearize.History
	errs      []string // what the clients saw that is wrong on its face
}

const (
	killWriters = 3
	killLockers = 2
)

func (l *killLoad) start(ctx context.Context, t *testing.T, endpoints []string) {
	l.clock = linearize.NewHistory()
	for id := range killWriters {
		cli := etcdClient(t, endpoints)
		l.wg.Go(func() { l.writer(ctx, cli, id) })
	}
	for id := range killLockers {
		cli := etcdClient(t, endpoints)
		l.wg.Go(func() { l.locker(ctx, cli, killWriters+id) })
	}
}

func (l *killLoad) record(client int, kind string, h *pb.ResponseHeader) {
	l.mu.Lock()
	l.acks[kind]++
	l.revs[client] = append(l.revs[client], h.Revision)
	l.mu.Unlock()
}

func (l *killLoad) fail(kind string) {
	l.mu.Lock()
	l.failures[kind]++
	l.mu.Unlock()
}

func (l *killLoad) wrong(format string, args ...any) {
	l.mu.Lock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *killLoad) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.acks)
}

// writer puts write-once keys, reads and deletes some of its own, and
// attaches keys to leases it then revokes.
func (l *killLoad) writer(ctx context.Context, cli *clientv3.Client, id int) {
	rng := rand.New(rand.NewPCG(l.seed, uint64(id)+1))
	var mine []string // acknowledged, not deleted
	op := func(f func(ctx context.Context) error) error {
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return f(octx)
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		var err error
		switch p := rng.IntN(20); {
		case p < 9 || len(mine) == 0:
			key, value := fmt.Sprintf("/ka/w/c%d-%d", id, seq), fmt.Sprintf("v%d-%d", id, seq)
			err = op(func(ctx context.Context) error {
				resp, err := cli.Put(ctx, key, value)
				if err != nil {
					return err
				}
				l.record(id, "put", resp.Header)
				l.mu.Lock()
				l.puts[key] = ackedPut{Value: value, Rev: resp.Header.Revision}
				l.mu.Unlock()
				mine = append(mine, key)
				return nil
			})
		case p < 11:
			key := mine[rng.IntN(len(mine))]
			err = op(func(ctx context.Context) error {
				resp, err := cli.Get(ctx, key)
				if err != nil {
					return err
				}
				l.record(id, "get", resp.Header)
				l.mu.Lock()
				want := l.puts[key]
				l.mu.Unlock()
				if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want.Value || resp.Kvs[0].ModRevision != want.Rev {
					l.wrong("client %d: get %s at revision %d returned %v; its put was acknowledged at revision %d with %q", id, key, resp.Header.Revision, resp.Kvs, want.Rev, want.Value)
				}
				return nil
			})
		case p < 15:
			// A Txn of many large puts: big entries make big write groups,
			// so a kill is likelier to land in the middle of one.
			var ops []clientv3.Op
			var keys, values []string
			for j := range 8 {
				keys = append(keys, fmt.Sprintf("/ka/w/c%d-%d-%d", id, seq, j))
				values = append(values, fmt.Sprintf("t%d-%d-%d-%s", id, seq, j, strings.Repeat("x", 1024)))
				ops = append(ops, clientv3.OpPut(keys[j], values[j]))
			}
			err = op(func(ctx context.Context) error {
				resp, err := cli.Txn(ctx).Then(ops...).Commit()
				if err != nil {
					return err
				}
				l.record(id, "txn", resp.Header)
				l.mu.Lock()
				for j, key := range keys {
					l.puts[key] = ackedPut{Value: values[j], Rev: resp.Header.Revision}
				}
				mine = append(mine, keys...)
				l.mu.Unlock()
				return nil
			})
		case p < 17:
			i := rng.IntN(len(mine))
			key := mine[i]
			mine = slices.Delete(mine, i, i+1)
			err = op(func(ctx context.Context) error {
				resp, err := cli.Delete(ctx, key)
				if err != nil {
					l.mu.Lock()
					l.uncertain[key] = true
					l.mu.Unlock()
					return err
				}
				l.record(id, "delete", resp.Header)
				l.mu.Lock()
				l.deletes[key] = resp.Header.Revision
				l.mu.Unlock()
				if resp.Deleted != 1 {
					l.wrong("client %d: delete of %s (acknowledged, never deleted) at revision %d deleted %d keys", id, key, resp.Header.Revision, resp.Deleted)
				}
				return nil
			})
		default:
			err = l.leaseRound(ctx, cli, id, seq, op)
		}
		if err != nil {
			pause(ctx, 20*time.Millisecond)
		}
	}
}

// leaseRound grants a lease, attaches a new key to it and revokes it: the
// key must be gone with the revoke.
func (l *killLoad) leaseRound(ctx context.Context, cli *clientv3.Client, id, seq int, op func(func(context.Context) error) error) error {
	var lease clientv3.LeaseID
	if err := op(func(ctx context.Context) error {
		resp, err := cli.Grant(ctx, 60)
		if err != nil {
			l.fail("lease grant")
			return err
		}
		l.record(id, "lease grant", resp.ResponseHeader)
		lease = resp.ID
		return nil
	}); err != nil {
		return err
	}
	key, value := fmt.Sprintf("/ka/l/c%d-%d", id, seq), fmt.Sprintf("l%d-%d", id, seq)
	if err := op(func(ctx context.Context) error {
		resp, err := cli.Put(ctx, key, value, clientv3.WithLease(lease))
		if err != nil {
			l.fail("lease put")
			return err
		}
		l.record(id, "lease put", resp.Header)
		l.mu.Lock()
		l.puts[key] = ackedPut{Value: value, Rev: resp.Header.Revision}
		l.mu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	return op(func(ctx context.Context) error {
		resp, err := cli.Revoke(ctx, lease)
		if err != nil {
			l.fail("lease revoke")
			return err
		}
		l.record(id, "lease revoke", resp.Header)
		l.mu.Lock()
		l.revoked[key] = resp.Header.Revision
		l.mu.Unlock()
		return nil
	})
}

// locker takes a contended lock and, while holding it, writes /ka/fence
// through a Txn guarded by its ownership: the value is its lock key, whose
// create revision is its fencing token.
func (l *killLoad) locker(ctx context.Context, cli *clientv3.Client, id int) {
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10), concurrency.WithContext(ctx))
		if err != nil {
			l.fail("lock session")
			pause(ctx, 100*time.Millisecond)
			continue
		}
		m := concurrency.NewMutex(s, "/ka/lock/")
		for ctx.Err() == nil {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := m.Lock(lctx); err != nil {
				cancel()
				l.fail("lock")
				break
			}
			acquired := l.clock.Now()
			resp, err := cli.Txn(lctx).If(m.IsOwner()).Then(clientv3.OpPut("/ka/fence", m.Key()), clientv3.OpGet(m.Key())).Commit()
			if err == nil && resp.Succeeded {
				token := resp.Responses[1].GetResponseRange().Kvs[0].CreateRevision
				l.record(id, "lock hold", resp.Header)
				l.mu.Lock()
				l.fences = append(l.fences, ackedPut{Value: m.Key(), Rev: resp.Header.Revision})
				l.holds = append(l.holds, linearize.LockHold{Client: id, Token: token, Acquired: acquired, Released: l.clock.Now()})
				l.mu.Unlock()
			} else if err != nil {
				l.fail("fenced write")
			}
			err = m.Unlock(lctx)
			cancel()
			if err != nil {
				l.fail("unlock")
				break
			}
		}
		s.Orphan()
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cli.Revoke(cctx, s.Lease())
		cancel()
	}
}

// event is one watch event as a member reported it, every field that a
// replica must agree on.
type event struct {
	Rev     int64
	Type    mvccpb.Event_EventType
	Key     string
	Value   string
	Create  int64
	Mod     int64
	Version int64
	Lease   int64
}

func (e event) String() string {
	return fmt.Sprintf("%s %s=%q create=%d mod=%d version=%d lease=%x", e.Type, e.Key, short(e.Value), e.Create, e.Mod, e.Version, e.Lease)
}

// short keeps a failure message readable when values are large.
func short(v string) string {
	if len(v) <= 32 {
		return v
	}
	return fmt.Sprintf("%s…(%d bytes)", v[:24], len(v))
}

// memberHistory reads node i's own history: a watch of every key from
// revision from through end (events after it are left out), on a client of that member alone (a member
// serves watches from its own store). A member that no longer holds
// revision from answers with a compactedError.
func memberHistory(ctx context.Context, t *testing.T, c *Cluster, i int, from, end int64) ([]event, error) {
	cli := etcdClient(t, []string{c.Nodes[i].EtcdAddr})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []event
	for resp := range cli.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if resp.CompactRevision > 0 {
			return out, compactedError{node: c.Nodes[i].ID, from: from, rev: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			return out, fmt.Errorf("node %d: watch from revision %d: %w", c.Nodes[i].ID, from, err)
		}
		for _, e := range resp.Events {
			kv := e.Kv
			if kv.ModRevision > end {
				// Written after the end marker (a lock session's lease
				// expiring, say): past what the test compares.
				return out, nil
			}
			out = append(out, event{Rev: kv.ModRevision, Type: e.Type, Key: string(kv.Key), Value: string(kv.Value),
				Create: kv.CreateRevision, Mod: kv.ModRevision, Version: kv.Version, Lease: kv.Lease})
		}
		if len(out) > 0 && out[len(out)-1].Rev >= end {
			return out, nil
		}
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("node %d: watch ended at %d events short of revision %d: %w", c.Nodes[i].ID, len(out), end, ctx.Err())
	}
	return out, fmt.Errorf("node %d: watch closed at %d events, short of revision %d, with no error", c.Nodes[i].ID, len(out), end)
}

// putMarker writes key until a write is acknowledged, or ctx ends, and
// returns its revision: a marker written again after an election refused
// or interrupted it marks the same point for the caller.
func putMarker(ctx context.Context, cli *clientv3.Client, key, value string) (int64, error) {
	for {
		resp, err := cli.Put(ctx, key, value)
		if err == nil {
			return resp.Header.Revision, nil
		}
		if ctx.Err() != nil {
			return 0, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// compactedError says a member's history starts after the revision asked
// for: it has compacted it, or caught up by a snapshot taken at rev.
type compactedError struct {
	node      uint64
	from, rev int64
}

func (e compactedError) Error() string {
	return fmt.Sprintf("node %d: watch from revision %d: compacted at %d", e.node, e.from, e.rev)
}

// check reads what the members hold once the load has stopped (each
// member's history, the final state, HashKV at one revision) and fails t
// with every problem verdict finds.
func (l *killLoad) check(t *testing.T, c *Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("kill-all load (seed %d): definite answers %v, failures %v; %d keys put, %d deleted, %d deletes unknown, %d leases revoked, %d fenced writes",
		l.seed, l.acks, l.failures, len(l.puts), len(l.deletes), len(l.uncertain), len(l.revoked), len(l.fences))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := etcdClient(t, c.EtcdEndpoints())
	end, err := putMarker(ctx, cli, "/ka/end", "")
	if err != nil {
		t.Fatalf("final write: %v", err)
	}
	var got killAllState
	for i, n := range c.Nodes {
		h, err := memberHistory(ctx, t, c, i, 1, end)
		if err != nil {
			t.Fatalf("seed %d: %v", l.seed, err)
		}
		got.histories = append(got.histories, h)
		got.ids = append(got.ids, n.ID)
		hash, err := etcdClient(t, []string{n.EtcdAddr}).HashKV(ctx, n.EtcdAddr, end)
		if err != nil {
			t.Fatalf("node %d: HashKV at %d: %v", n.ID, end, err)
		}
		got.hashes = append(got.hashes, hash.Hash)
	}
	resp, err := cli.Get(ctx, "/ka/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("final range: %v", err)
	}
	got.final = map[string]int64{}
	for _, kv := range resp.Kvs {
		got.final[string(kv.Key)] = kv.ModRevision
	}
	problems := l.verdict(got)
	for _, p := range problems {
		t.Errorf("seed %d: %s", l.seed, p)
	}
	if len(problems) == 0 {
		t.Logf("every member holds the same %d events through revision %d; HashKV at %d: %v", len(got.histories[0]), end, end, got.hashes)
	}
}

// killAllState is what the members held at the end of TestClusterKillAll.
type killAllState struct {
	ids       []uint64
	histories [][]event        // per member, its events through the end marker
	hashes    []uint32         // per member, HashKV at the end marker
	final     map[string]int64 // every /ka/ key at the end -> its mod revision
}

// verdict checks what the clients were told against what the members hold
// and returns every problem: too little done, members that diverge (first
// differing event, clearly named), acknowledged puts, deletes, revokes or
// fenced writes missing, fencing tokens out of commit order, revisions
// that went back for a client, HashKV that differs. The caller holds l.mu.
func (l *killLoad) verdict(s killAllState) []string {
	var problems []string
	for _, k := range killAllKinds {
		if l.acks[k] < minPerFault {
			problems = append(problems, fmt.Sprintf("the load did too little to check: %d definite answers to %s", l.acks[k], k))
		}
	}
	problems = append(problems, l.errs...)
	if err := linearize.CheckRevisionsMonotonic(l.revs); err != nil {
		problems = append(problems, fmt.Sprintf("revisions per client: %v", err))
	}
	if err := linearize.CheckLocks(l.holds); err != nil {
		problems = append(problems, fmt.Sprintf("lock holds: %v", err))
	}
	// Equal event sequences from revision 1 mean equal states at every
	// revision. Every pair is compared, so the report shows which members
	// went their own way.
	for i := range s.histories {
		for j := i + 1; j < len(s.histories); j++ {
			if err := compareHistories(s.histories[i], s.histories[j]); err != nil {
				problems = append(problems, fmt.Sprintf("members %d and %d DIVERGE: %v", s.ids[i], s.ids[j], err))
			}
		}
	}
	for i := 1; i < len(s.hashes); i++ {
		if s.hashes[i] != s.hashes[0] {
			problems = append(problems, fmt.Sprintf("HashKV at the end differs between members %v: %v", s.ids, s.hashes))
			break
		}
	}

	// Acknowledged effects, against the first member's history (the others
	// were compared with it) and the final state.
	at := map[int64][]event{}
	for _, e := range s.histories[0] {
		at[e.Rev] = append(at[e.Rev], e)
	}
	has := func(rev int64, want func(event) bool) bool { return slices.ContainsFunc(at[rev], want) }
	var lost []string
	for key, p := range l.puts {
		if !has(p.Rev, func(e event) bool { return e.Type == mvccpb.PUT && e.Key == key && e.Value == p.Value }) {
			lost = append(lost, fmt.Sprintf("put %s=%q@%d", key, short(p.Value), p.Rev))
		}
	}
	for key, rev := range l.deletes {
		if !has(rev, func(e event) bool { return e.Type == mvccpb.DELETE && e.Key == key }) {
			lost = append(lost, fmt.Sprintf("delete %s@%d", key, rev))
		}
	}
	for key, rev := range l.revoked {
		put, found := l.puts[key].Rev, false
		for r := put + 1; r <= rev && !found; r++ {
			found = has(r, func(e event) bool { return e.Type == mvccpb.DELETE && e.Key == key })
		}
		if !found {
			lost = append(lost, fmt.Sprintf("revoke of %s's lease@%d (no delete after its put@%d)", key, rev, put))
		}
	}
	for _, f := range l.fences {
		if !has(f.Rev, func(e event) bool { return e.Type == mvccpb.PUT && e.Key == "/ka/fence" && e.Value == f.Value }) {
			lost = append(lost, fmt.Sprintf("fenced write by %s@%d", f.Value, f.Rev))
		}
	}
	for key, p := range l.puts {
		_, deleted := l.deletes[key]
		_, revoked := l.revoked[key]
		rev, present := s.final[key]
		switch {
		case l.uncertain[key]:
		case (deleted || revoked) && present:
			lost = append(lost, fmt.Sprintf("delete of %s (still there at %d)", key, rev))
		case !deleted && !revoked && isWriteOnce(key) && (!present || rev != p.Rev):
			lost = append(lost, fmt.Sprintf("put %s@%d (final: present=%v at %d)", key, p.Rev, present, rev))
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		problems = append(problems, fmt.Sprintf("%d acknowledged effects lost: %v", len(lost), lost[:min(len(lost), 10)]))
	}

	// Fencing: the fenced writes, in commit order, carry increasing tokens
	// (the create revision of the lock key each names).
	created := map[string]int64{} // key -> create revision of its latest incarnation
	var last int64
	for _, e := range s.histories[0] {
		if e.Type == mvccpb.PUT && e.Version == 1 {
			created[e.Key] = e.Create
		}
		if e.Type != mvccpb.PUT || e.Key != "/ka/fence" {
			continue
		}
		token, ok := created[e.Value]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("fenced write at revision %d names lock key %s, never created", e.Rev, e.Value))
		case token <= last:
			problems = append(problems, fmt.Sprintf("fencing tokens out of commit order: the write at revision %d carries token %d after token %d", e.Rev, token, last))
		}
		last = max(last, token)
	}
	return problems
}

func isWriteOnce(key string) bool { return len(key) > 6 && key[:6] == "/ka/w/" }

// compareHistories names the first event at which two members' histories
// differ, with a few events of context.
func compareHistories(a, b []event) error {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Errorf("first difference at event %d, revision %d/%d:\n  %v\n  %v\n(around it: %v | %v)", i, a[i].Rev, b[i].Rev, a[i], b[i], window(a, i), window(b, i))
		}
	}
	if len(a) != len(b) {
		return fmt.Errorf("one history is a prefix of the other: %d events vs %d", len(a), len(b))
	}
	return nil
}

func window(h []event, i int) []event { return h[max(0, i-2):min(len(h), i+3)] }
