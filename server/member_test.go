package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/testlog"
)

// fakeClock is a settable clock for lease tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func openTestMember(t *testing.T, dir string, clock *fakeClock) *Member {
	t.Helper()
	cfg := MemberConfig{DataDir: dir, Logger: testlog.New(t), LeaseCheckInterval: 5 * time.Millisecond}
	if clock != nil {
		cfg.Clock = clock.Now
	}
	m, err := OpenMember(cfg)
	if err != nil {
		t.Fatalf("open member: %v", err)
	}
	return m
}

// mustNode reads key from v, failing the test if the read fails: an error
// must never pass for "the key is gone".
func mustNode(t *testing.T, v core.View, key string) *core.Node {
	t.Helper()
	n, err := v.Node([]byte(key))
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return n
}

func putOp(k, v string, lease int64) *core.Op {
	return &core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte(k), Value: []byte(v), Lease: lease}}}}
}

func TestMemberWritesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	m := openTestMember(t, dir, nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Propose(ctx, putOp(string(rune('a'+i%26))+"/k", "v", 0)); err != nil {
				t.Errorf("propose: %v", err)
			}
		}()
	}
	wg.Wait()
	rev := m.Status().Rev
	if rev != 51 {
		t.Fatalf("revision %d after 50 puts, want 51", rev)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestMember(t, dir, nil)
	defer m.Close()
	if got := m.Status().Rev; got != rev {
		t.Fatalf("revision after restart %d, want %d", got, rev)
	}
	v, err := m.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	n := mustNode(t, v, "a/k")
	if n == nil || n.Version == 0 {
		t.Fatalf("a/k lost: %+v", n)
	}
}

func TestMemberWatchSeesCommittedRevisions(t *testing.T) {
	m := openTestMember(t, t.TempDir(), nil)
	defer m.Close()
	ctx := context.Background()
	m.Propose(ctx, putOp("a", "1", 0))
	sub, err := m.Watch(2) // replay from history, then live
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m.Propose(ctx, putOp("b", "2", 0))
	for want := int64(2); want <= 3; want++ {
		re := <-sub.Events()
		if re.Rev != want || len(re.Events) != 1 {
			t.Fatalf("got %+v, want revision %d", re, want)
		}
	}
}

func TestLeaseExpiryRevokesThroughTheLog(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	m := openTestMember(t, t.TempDir(), clock)
	defer m.Close()
	ctx := context.Background()
	id := m.Leases().NewID()
	if res, err := m.Propose(ctx, &core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: 5}}); err != nil || res.Err != nil {
		t.Fatalf("grant: %v %v", err, res)
	}
	if res, _ := m.Propose(ctx, putOp("/eph", "x", id)); res.Err != nil {
		t.Fatal(res.Err)
	}
	clock.Advance(4 * time.Second)
	if _, err := m.Leases().KeepAlive(ctx, id); err != nil {
		t.Fatalf("keepalive: %v", err)
	}
	clock.Advance(4 * time.Second) // 8s after grant, 4s after keepalive: alive
	if rem, ok := m.Leases().Remaining(id); !ok || rem != 1000 {
		t.Fatalf("remaining %d %v, want 1000ms", rem, ok)
	}
	clock.Advance(2 * time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := m.Leases().Remaining(id); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("expired lease was never revoked")
		}
		time.Sleep(5 * time.Millisecond)
	}
	v, err := m.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if n := mustNode(t, v, "/eph"); n != nil {
		t.Fatal("key of an expired lease survived")
	}
	if _, err := m.Leases().KeepAlive(ctx, id); core.CodeOf(err) != core.CodeLeaseNotFound {
		t.Fatalf("keepalive of an expired lease: %v", err)
	}
}

func TestLeasesGetAFreshTTLAfterRestart(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	dir := t.TempDir()
	m := openTestMember(t, dir, clock)
	ctx := context.Background()
	id := m.Leases().NewID()
	m.Propose(ctx, &core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: 10}})
	clock.Advance(9 * time.Second)
	m.Close()
	m = openTestMember(t, dir, clock)
	defer m.Close()
	if rem, ok := m.Leases().Remaining(id); !ok || rem != 10000 {
		t.Fatalf("after restart remaining %d %v, want a full 10s", rem, ok)
	}
}

func TestSubmitKeepsOneCallersOrder(t *testing.T) {
	m := openTestMember(t, t.TempDir(), nil)
	defer m.Close()
	ctx := context.Background()
	// A create then a create under it: only in order can both succeed.
	mk := func(path string) *core.Op {
		return &core.Op{Txn: &core.Txn{Auth: []core.ID{{Scheme: "ip", ID: "127.0.0.1"}},
			Success: []core.TxnOp{{Kind: core.OpCreate, Key: []byte(path), Create: &core.CreateOptions{}}}}}
	}
	var pending []core.Pending
	path := ""
	for i := range 50 {
		path += "/" + string(rune('a'+i%26))
		p, err := m.Submit(ctx, mk(path))
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
	}
	for i, p := range pending {
		res, err := p.Wait(ctx)
		if err != nil || res.Err != nil {
			t.Fatalf("create %d: %v %v", i, err, res)
		}
		if res.Rev != int64(i+2) {
			t.Fatalf("create %d at revision %d, want %d", i, res.Rev, i+2)
		}
	}
}
