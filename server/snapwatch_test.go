package server

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWatchesAcrossASyncBySnapshot cuts a follower off until the leader
// is too far ahead to send it a DIFF, so that it catches up by a snapshot
// (SYNC by SNAP), with an etcd watch and ZooKeeper watches open on it from
// before. A snapshot holds no history, so the follower cannot replay the
// events it missed: it must say so as etcd says it of a compacted
// revision (the watch canceled with the compact revision, which clientv3
// surfaces as ErrCompacted and from which a watch starts again without a
// gap), and as ZooKeeper does for a follower that resynchronizes (the
// connection dropped, and the watches the client sets again on reconnect
// fire for what changed meanwhile). Nothing may end silently.
func TestWatchesAcrossASyncBySnapshot(t *testing.T) {
	c := newReplicaCluster(t)
	for id := uint64(1); id <= 3; id++ {
		c.start(id, func(cfg *MemberConfig) { cfg.MaxDiffEntries = 5 })
	}
	var leader, follower uint64
	waitFor(t, "a leader", func() bool {
		for id, m := range c.members {
			if m.roles.leading.Load() {
				leader = id
			}
		}
		return leader != 0
	})
	follower = leader%3 + 1
	lm, fm := c.members[leader], c.members[follower]
	for _, k := range []string{"/w", "/a", "/b"} {
		c.propose(lm, putOp(k, "before", 0))
	}
	c.settle()
	before := fm.Status().Rev
	faces := startFaces(t, fm)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// An etcd watch from revision 1, live once it has replayed everything.
	cli := faces.etcdClient(t)
	open := cli.Watch(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(1))
	for seen := int64(0); seen < before; {
		resp, ok := <-open
		if !ok || resp.Err() != nil {
			t.Fatalf("watch from revision 1 before the snapshot: closed %v, %v", !ok, resp.Err())
		}
		for _, e := range resp.Events {
			seen = e.Kv.ModRevision
		}
	}

	// ZooKeeper watches: data on /w, existence of /later, children of /.
	zc, zev, err := zk.Connect([]string{faces.zkAddr}, 30*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	waitSession(t, zev)
	_, _, dataW, err := zc.GetW("/w")
	if err != nil {
		t.Fatal(err)
	}
	ok, _, existW, err := zc.ExistsW("/later")
	if err != nil || ok {
		t.Fatalf("exists /later: %v %v", ok, err)
	}
	_, _, childW, err := zc.ChildrenW("/")
	if err != nil {
		t.Fatal(err)
	}

	// Cut off, the follower falls more than MaxDiffEntries behind.
	c.net.Partition([]uint64{follower})
	waitFor(t, "the follower to lose its leader", func() bool { return fm.Status().LeaderID == 0 })
	c.propose(lm, putOp("/w", "during", 0))
	c.propose(lm, putOp("/later", "during", 0))
	for i := range 10 {
		c.propose(lm, putOp(fmt.Sprintf("/fill/%d", i), "x", 0))
	}
	c.net.Partition()
	c.settle()
	restored := restoredRevs(c.logs[follower].lines("store restored from snapshot"))
	if len(restored) != 1 {
		t.Fatalf("follower %d was not synced by one snapshot (restores at %v): the test did not set up what it tests", follower, restored)
	}
	first := restored[0] + 1 // the first revision the follower can replay
	t.Logf("follower %d restored a snapshot at revision %d, having seen %d", follower, restored[0], before)

	// The open watch ends as etcd ends a watch below its compact revision.
	var last clientv3.WatchResponse
	for resp := range open {
		last = resp
		if resp.Canceled || resp.Err() != nil {
			break
		}
		if len(resp.Events) > 0 {
			t.Fatalf("the open watch got events %v after the snapshot: they cannot be gap-free", resp.Events)
		}
	}
	if !errors.Is(last.Err(), rpctypes.ErrCompacted) || last.CompactRevision != first {
		t.Fatalf("the watch open across the snapshot ended with %v (compact revision %d, canceled %v), want ErrCompacted at %d",
			last.Err(), last.CompactRevision, last.Canceled, first)
	}

	// So does a new watch from before the snapshot, and a read there.
	resp, ok := <-cli.Watch(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(before))
	if !ok || !errors.Is(resp.Err(), rpctypes.ErrCompacted) || resp.CompactRevision != first {
		t.Fatalf("a watch from %d after the snapshot: open %v, %v, compact revision %d; want ErrCompacted at %d",
			before, ok, resp.Err(), resp.CompactRevision, first)
	}
	if _, err := cli.Get(ctx, "/w", clientv3.WithRev(before)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("a read at %d after the snapshot: %v, want ErrCompacted", before, err)
	}
	// A Txn that writes and reads there is refused whole, before it is
	// ordered: the other members can read that revision, so Apply would
	// run its writes and only this member's answer would fail.
	_, err = cli.Txn(ctx).Then(clientv3.OpPut("/txn", "x"), clientv3.OpGet("/w", clientv3.WithRev(before))).Commit()
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("a Txn reading at %d after the snapshot: %v, want ErrCompacted", before, err)
	}
	if got, err := cli.Get(ctx, "/txn"); err != nil || len(got.Kvs) != 0 {
		t.Fatalf("the refused Txn wrote: %v %v", got, err)
	}
	hash, err := cli.HashKV(ctx, faces.etcdAddr, 0)
	if err != nil || hash.CompactRevision != first {
		t.Fatalf("HashKV compact revision %d (%v), want %d", hash.CompactRevision, err, first)
	}

	// A watch from the compact revision it was given misses nothing after.
	resumed := cli.Watch(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(first))
	after := c.propose(lm, putOp("/after", "x", 0)).Rev
	for seen := int64(0); seen < after; {
		resp, ok := <-resumed
		if !ok || resp.Err() != nil {
			t.Fatalf("a watch from the compact revision %d: closed %v, %v", first, !ok, resp.Err())
		}
		for _, e := range resp.Events {
			seen = e.Kv.ModRevision
		}
	}

	// The ZooKeeper client was dropped; on reconnecting it set its watches
	// again, and each fires for what changed while the follower was cut off.
	for _, w := range []struct {
		name string
		ch   <-chan zk.Event
		want zk.EventType
	}{{"data watch on /w", dataW, zk.EventNodeDataChanged}, {"exists watch on /later", existW, zk.EventNodeCreated},
		{"child watch on /", childW, zk.EventNodeChildrenChanged}} {
		select {
		case ev := <-w.ch:
			if ev.Type != w.want {
				t.Errorf("%s fired %v, want %v", w.name, ev.Type, w.want)
			}
		case <-ctx.Done():
			t.Fatalf("%s never fired", w.name)
		}
	}
}

// waitSession waits until a ZooKeeper client has its session.
func waitSession(t *testing.T, events <-chan zk.Event) {
	t.Helper()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			return
		}
	}
	t.Fatal("the ZooKeeper client got no session")
}

// restoredRevs reads the revisions of a member's "store restored from
// snapshot" log lines.
func restoredRevs(lines []string) []int64 {
	var revs []int64
	for _, l := range lines {
		if m := restoredRevRE.FindStringSubmatch(l); m != nil {
			rev, _ := strconv.ParseInt(m[1], 10, 64)
			revs = append(revs, rev)
		}
	}
	return revs
}

var restoredRevRE = regexp.MustCompile(` rev=(\d+)`)
