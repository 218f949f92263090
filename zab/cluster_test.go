package zab

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testlog"
)

// replSM is a deterministic state machine for replication tests: it
// records every entry it applies and can copy itself (Snapshotter). Its
// state survives a member's restart (as a store on disk would) unless the
// test wipes it.
type replSM struct {
	mu      sync.Mutex
	start   uint64 // index before entries[0]
	entries []Entry
	base    []string     // payloads restored from a snapshot, before entries
	early   atomic.Int64 // batches handed before they were durable
}

// ApplyWhen makes replSM a DurableWaiter: a member that leads as the only
// voter hands it entries before their flush.
func (s *replSM) ApplyWhen(ents []Entry, durable func() error) ([]any, error) {
	s.early.Add(1)
	if err := durable(); err != nil {
		return nil, err
	}
	return s.Apply(ents)
}

func (s *replSM) Apply(ents []Entry) ([]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]any, len(ents))
	for i, e := range ents {
		if want := s.lastLocked() + 1; e.Index != want {
			return nil, fmt.Errorf("applied index %d, want %d", e.Index, want)
		}
		e.Data = bytes.Clone(e.Data)
		s.entries = append(s.entries, e)
		out[i] = applied{Index: e.Index, Data: string(e.Data)}
	}
	return out, nil
}

func (s *replSM) lastLocked() uint64 { return s.start + uint64(len(s.entries)) }

func (s *replSM) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastLocked()
}

func (s *replSM) Sync() (uint64, error) { return s.AppliedIndex(), nil }

// history is every payload applied, snapshot-restored ones included, in
// index order (index i+1 at position i).
func (s *replSM) history() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.base)
	for _, e := range s.entries {
		out = append(out, string(e.Data))
	}
	return out
}

func (s *replSM) Snapshot(w io.Writer) (uint64, error) {
	h := s.history()
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(h)))
	for _, p := range h {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	_, err := w.Write(b)
	return uint64(len(h)), err
}

func (s *replSM) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	n, k := binary.Uvarint(b)
	b = b[k:]
	var h []string
	for range n {
		l, k := binary.Uvarint(b)
		h = append(h, string(b[k:k+int(l)]))
		b = b[k+int(l):]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base, s.entries, s.start = h, nil, uint64(len(h))
	return nil
}

type testNode struct {
	id  uint64
	dir string
	sm  *replSM
	m   *Member
}

type cluster struct {
	t         *testing.T
	seed      uint64 // of the network's faults, and of a test's own choices
	log       *slog.Logger
	net       *MemNetwork
	peers     map[uint64]string
	observers map[uint64]string
	nodes     map[uint64]*testNode
	tweak     func(*Config)
	spare     []int // loopback ports for members added later (TCP tests)
}

var seedFlag = flag.Uint64("zab.seed", 0, "seed of the in-memory network's faults and of the randomized tests' choices (0: from the clock)")

// testSeed returns the seed a randomized test runs with, -zab.seed or one
// from the clock, and logs it. The seed fixes every random choice (which
// messages the network drops, duplicates and delays, and TestChaos's fault
// schedule); goroutine scheduling still varies between runs.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -zab.seed=%d)", s, s)
	return s
}

func newCluster(t *testing.T, voters, observers int) *cluster {
	t.Helper()
	seed := testSeed(t)
	// The logger first, so that its cleanup runs after the members close.
	c := &cluster{t: t, seed: seed, log: testlog.New(t), net: NewMemNetwork(seed), peers: map[uint64]string{},
		observers: map[uint64]string{}, nodes: map[uint64]*testNode{}}
	for i := 1; i <= voters; i++ {
		c.peers[uint64(i)] = fmt.Sprintf("mem-%d", i)
	}
	for i := voters + 1; i <= voters+observers; i++ {
		c.observers[uint64(i)] = fmt.Sprintf("mem-%d", i)
	}
	for id := range c.all() {
		c.nodes[id] = &testNode{id: id, dir: t.TempDir(), sm: &replSM{}}
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.m != nil {
				n.m.Close()
			}
		}
		c.net.Wait()
	})
	return c
}

func (c *cluster) all() map[uint64]bool {
	out := map[uint64]bool{}
	for id := range c.peers {
		out[id] = true
	}
	for id := range c.observers {
		out[id] = true
	}
	return out
}

func (c *cluster) ids() []uint64 {
	var ids []uint64
	for id := range c.all() {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (c *cluster) startAll() {
	for _, id := range c.ids() {
		c.start(id)
	}
}

func (c *cluster) start(id uint64) {
	c.t.Helper()
	n := c.nodes[id]
	cfg := Config{
		Dir: n.dir, ID: id, Peers: c.peers, Observers: c.observers, Transport: c.net.Endpoint(id),
		ElectionTimeout: 200 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond,
		SegmentSize: 4 << 10,
	}
	cfg.Logger = c.log.With("node", id)
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	m, err := Open(cfg, n.sm)
	if err != nil {
		c.t.Fatalf("open member %d: %v", id, err)
	}
	n.m = m
}

// stop closes a member (a crash, as far as the others can tell).
func (c *cluster) stop(id uint64) {
	c.t.Helper()
	n := c.nodes[id]
	if err := n.m.Close(); err != nil {
		c.t.Fatalf("close member %d: %v", id, err)
	}
	n.m = nil
}

// wipe replaces a stopped member's log and state with empty ones.
func (c *cluster) wipe(id uint64) {
	n := c.nodes[id]
	n.dir, n.sm = c.t.TempDir(), &replSM{}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leader waits until one running member leads and every running member in
// ids (all running ones if none) is synchronized with it.
func (c *cluster) leader(ids ...uint64) uint64 {
	c.t.Helper()
	if len(ids) == 0 {
		for _, id := range c.ids() {
			if c.nodes[id].m != nil {
				ids = append(ids, id)
			}
		}
	}
	var leader uint64
	eventually(c.t, fmt.Sprintf("a leader followed by %v", ids), func() bool {
		leader = 0
		for _, id := range ids {
			st := c.nodes[id].m.Status()
			if st.Role == RoleLeader {
				leader = id
			}
		}
		if leader == 0 {
			return false
		}
		for _, id := range ids {
			st := c.nodes[id].m.Status()
			if st.LeaderID != leader || st.Role == RoleLooking {
				return false
			}
		}
		return true
	})
	return leader
}

// propose proposes on member id, retrying while there is no leader.
func (c *cluster) propose(id uint64, data string) applied {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := c.nodes[id].m.Propose(ctx, []byte(data))
		cancel()
		if err == nil {
			return v.(applied)
		}
		if time.Now().After(deadline) || !retryable(err) {
			c.t.Fatalf("propose %q on %d: %v", data, id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func retryable(err error) bool {
	return errors.Is(err, ErrNoLeader) || errors.Is(err, ErrLeaderChanged) || errors.Is(err, context.DeadlineExceeded)
}

// converge waits until every running member has applied index, then checks
// that their histories are identical.
func (c *cluster) converge(index uint64) []string {
	c.t.Helper()
	var running []*testNode
	for _, id := range c.ids() {
		if n := c.nodes[id]; n.m != nil {
			running = append(running, n)
		}
	}
	for _, n := range running {
		eventually(c.t, fmt.Sprintf("member %d to apply index %d", n.id, index), func() bool {
			return n.m.Status().AppliedIndex >= index
		})
	}
	want := running[0].sm.history()[:index]
	for _, n := range running[1:] {
		got := n.sm.history()[:index]
		if !slices.Equal(got, want) {
			c.t.Fatalf("member %d applied %q\nmember %d applied %q", n.id, got, running[0].id, want)
		}
	}
	return want
}

func TestClusterElectsOneLeaderAndReplicates(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := newCluster(t, size, 1)
			c.startAll()
			l := c.leader()
			var want []string
			for i := range 20 {
				id := c.ids()[i%len(c.ids())] // leader, followers and the observer
				data := fmt.Sprintf("w%d", i)
				r := c.propose(id, data)
				if r.Data != data {
					t.Fatalf("proposal %q on %d answered with %+v", data, id, r)
				}
				// Read-your-writes on the member that took the request.
				if got := c.nodes[id].m.Status().AppliedIndex; got < r.Index {
					t.Fatalf("member %d answered index %d having applied %d", id, r.Index, got)
				}
				want = append(want, data)
			}
			got := c.converge(20)
			if !slices.Equal(got, want) {
				t.Fatalf("applied %q, want %q", got, want)
			}
			st := c.nodes[l].m.Status()
			if st.Epoch == 0 || st.AcceptedEpoch != st.Epoch || st.CommittedIndex < 20 {
				t.Fatalf("leader status %+v", st)
			}
			obs := c.nodes[uint64(size+1)].m.Status()
			if obs.Role != RoleObserver || obs.LeaderID != l {
				t.Fatalf("observer status %+v", obs)
			}
		})
	}
}

var _ = strings.Contains
