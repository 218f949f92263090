package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zab"
)

// TestRestoreReplacesNonEmptyState restores a snapshot of one member into
// another that already holds different data, as zab does for a follower
// too far behind: the new state must be served at once, survive a
// restart, and a view taken before the restore must stay readable.
func TestRestoreReplacesNonEmptyState(t *testing.T) {
	ctx := context.Background()
	src := openTestMember(t, t.TempDir(), nil)
	defer src.Close()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := src.Propose(ctx, putOp(k, "from-src", 0)); err != nil {
			t.Fatal(err)
		}
	}
	id := src.Leases().NewID()
	if _, err := src.Propose(ctx, &core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: 30}}); err != nil {
		t.Fatal(err)
	}
	proposeZK(t, src, zkCreate("/src-c", core.ModeContainer, 0))
	var snap bytes.Buffer
	if _, err := (&stateMachine{m: src}).Snapshot(&snap); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	dst := openTestMember(t, dir, nil)
	if _, err := dst.Propose(ctx, putOp("old", "x", 0)); err != nil {
		t.Fatal(err)
	}
	proposeZK(t, dst, zkCreate("/old-c", core.ModeContainer, 0))
	if got := dst.reaper.candidates.paths(); !slices.Equal(got, []string{"/old-c"}) {
		t.Fatalf("reaper candidates before the restore: %q", got)
	}
	before, err := dst.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := dst.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&stateMachine{m: dst}).Restore(&snap); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if n, err := before.Node([]byte("old")); err != nil || n == nil {
		t.Fatalf("a view taken before the restore broke: %v %v", n, err)
	}
	before.Close()
	if _, open := <-sub.Events(); open {
		t.Fatal("a watcher of the replaced state was not ended")
	}
	check := func(m *Member) {
		t.Helper()
		v, err := m.Read(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if n := mustNode(t, v, "b"); n == nil || string(n.Value) != "from-src" {
			t.Fatalf("restored key b: %+v", n)
		}
		if n := mustNode(t, v, "old"); n != nil {
			t.Fatal("the replaced state's key survived the restore")
		}
		if v.Rev() != src.Status().Rev {
			t.Fatalf("revision %d, want the snapshot's %d", v.Rev(), src.Status().Rev)
		}
		if _, ok := m.Leases().Remaining(id); !ok {
			t.Fatal("the snapshot's lease is unknown to the lessor")
		}
		if got := m.reaper.candidates.paths(); !slices.Equal(got, []string{"/src-c"}) {
			t.Fatalf("reaper candidates %q, want the snapshot's container only", got)
		}
	}
	check(dst)
	// (No proposal here: after a real SNAP, zab also resets its log to the
	// snapshot's index, which this direct call does not.)
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil || !strings.HasPrefix(string(b), defaultStateDir+"-") {
		t.Fatalf("%s = %q, %v", stateFile, b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, defaultStateDir)); !os.IsNotExist(err) {
		t.Fatalf("the replaced state directory is still there: %v", err)
	}
	dst = openTestMember(t, dir, nil)
	defer dst.Close()
	check(dst)
}

func TestLeaderCallRoundTrip(t *testing.T) {
	ctx := context.Background()
	m := openTestMember(t, t.TempDir(), nil)
	defer m.Close()
	id := m.Leases().NewID()
	if _, err := m.Propose(ctx, &core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: 7}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		kind      byte
		id        int64
		wantFound bool
		want      int64
	}{
		{"keepalive", callKeepAlive, id, true, 7},
		{"keepalive of an unknown lease", callKeepAlive, id + 1, false, 0},
		{"remaining", callRemaining, id, true, 7000},
		{"remaining of an unknown lease", callRemaining, id + 1, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A single member's CallLeader runs the handler locally, through
			// the same encoding a follower's call takes.
			got, found, err := m.callLeader(ctx, tt.kind, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if found != tt.wantFound || (tt.kind == callKeepAlive && got != tt.want) || (tt.kind == callRemaining && found && (got <= 0 || got > tt.want)) {
				t.Fatalf("got %d found=%v, want %d found=%v", got, found, tt.want, tt.wantFound)
			}
		})
	}
}

// TestMembershipEntryIsANoOpOnTheTree applies zab's configuration entry
// to the server's state machine: its index is applied, its result is nil,
// and the tree (revision, keys) does not change.
func TestMembershipEntryIsANoOpOnTheTree(t *testing.T) {
	ctx := context.Background()
	m := openTestMember(t, t.TempDir(), nil)
	defer m.Close()
	if _, err := m.Propose(ctx, putOp("a", "1", 0)); err != nil {
		t.Fatal(err)
	}
	sm := &stateMachine{m: m}
	rev, applied := m.Status().Rev, sm.AppliedIndex()
	conf, err := zab.NewMembership([]uint64{1, 2, 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	conf.Addrs = map[uint64]string{1: "a:1", 2: "b:2", 3: "c:3"}
	// Applied directly, after the member's last write, as zab's applier
	// would: the member proposes nothing more.
	res, err := sm.Apply([]zab.Entry{{Index: applied + 1, Zxid: zab.MakeZxid(9, 1), Time: 1,
		Kind: zab.EntryMembership, Data: zab.EncodeMembership(conf)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0] != nil {
		t.Fatalf("results %#v, want one nil", res)
	}
	if got := sm.AppliedIndex(); got != applied+1 {
		t.Fatalf("applied index %d, want %d", got, applied+1)
	}
	if got := m.Status().Rev; got != rev {
		t.Fatalf("revision %d after the configuration entry, want %d", got, rev)
	}
	v, err := m.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if n := mustNode(t, v, "a"); n == nil || string(n.Value) != "1" {
		t.Fatalf("key a: %+v", n)
	}
}
