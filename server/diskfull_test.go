package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/internal/testlog"
)

// diskFault is a SpaceFault a test fills and empties.
type diskFault struct{ full atomic.Bool }

func (d *diskFault) check() error {
	if d.full.Load() {
		return fmt.Errorf("test disk: %w", unix.ENOSPC)
	}
	return nil
}

// A member whose disk fills raises its own NOSPACE alarm, refuses writes
// with etcd's "database space exceeded" and keeps serving reads; once the
// disk takes writes again the alarm is gone and writes go through, with no
// restart, and no acknowledged write is lost.
func TestDiskFullIsAnAlarmNotADeath(t *testing.T) {
	dir := t.TempDir()
	var disk diskFault
	m, err := OpenMember(MemberConfig{DataDir: dir, Logger: testlog.New(t), SpaceFault: disk.check})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m.Close() }()
	faces := startFaces(t, m)
	cli := faces.etcdClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var acked []string
	put := func(k string) error {
		_, err := cli.Put(ctx, k, "v-"+k)
		if err == nil {
			acked = append(acked, k)
		}
		return err
	}
	for i := range 3 {
		if err := put(fmt.Sprintf("/before/%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	// A ZooKeeper session opened before the disk fills keeps reading; a new
	// one cannot start, since a session is a lease grant, a write (as
	// etcd refuses LeaseGrant under NOSPACE).
	zc, events, err := zk.Connect([]string{faces.zkAddr}, 5*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}

	disk.full.Store(true)
	err = put("/refused")
	if err == nil || !strings.Contains(err.Error(), "etcdserver: mvcc: database space exceeded") {
		t.Fatalf("put on a full disk: %v, want etcd's database space exceeded", err)
	}
	if _, err := m.Propose(ctx, putOp("/refused2", "v", 0)); !errors.Is(err, core.ErrNoSpace) {
		t.Fatalf("Propose on a full disk: %v, want core.ErrNoSpace", err)
	}
	resp, err := cli.Get(ctx, "/before/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 3 {
		t.Fatalf("read on a full disk: %v, %d keys; want the 3 written", err, len(resp.Kvs))
	}
	st := m.Status()
	if st.Err != nil || st.Serving() || !slices.Contains(st.Alarms, "NOSPACE") {
		t.Fatalf("status on a full disk: err %v, alarms %v, serving %v; want running, NOSPACE, not serving",
			st.Err, st.Alarms, st.Serving())
	}
	if out := etcdctl(t, faces.etcdAddr, "alarm", "list"); !strings.Contains(out, "memberID:1 alarm:NOSPACE") {
		t.Errorf("etcdctl alarm list on a full disk: %q, want this member's NOSPACE", out)
	}
	if out := fourLetter(t, faces.zkAddr, "mntr"); !strings.Contains(out, "NOSPACE") {
		t.Errorf("mntr on a full disk does not show NOSPACE:\n%s", out)
	}
	if data, _, err := zc.Get("/before/0"); err != nil || string(data) != "v-/before/0" {
		t.Errorf("ZooKeeper read on a full disk: %q, %v", data, err)
	}
	// The same answer as a quota's NOSPACE (see zkapi's codeOf): error
	// code -1, SystemError, which clients raise at once and keep their
	// session through.
	if _, err := zc.Create("/zk-refused", nil, 0, zk.WorldACL(zk.PermAll)); err == nil {
		t.Error("ZooKeeper create on a full disk succeeded")
	} else if !strings.Contains(err.Error(), "-1") || errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("ZooKeeper create on a full disk: %v, want SystemError (-1)", err)
	}
	if _, _, err := zc.Get("/before/0"); err != nil {
		t.Errorf("ZooKeeper read after a refused create: %v (the session must go on)", err)
	}

	disk.full.Store(false)
	if err := put("/after"); err != nil {
		t.Fatalf("put after space returned: %v", err)
	}
	if st := m.Status(); !st.Serving() || len(st.Alarms) != 0 {
		t.Fatalf("status after space returned: alarms %v, serving %v", st.Alarms, st.Serving())
	}
	if out := etcdctl(t, faces.etcdAddr, "alarm", "list"); strings.TrimSpace(out) != "" {
		t.Errorf("etcdctl alarm list after space returned: %q, want none", out)
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestMember(t, dir, nil)
	v, err := m.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, k := range acked {
		if n := mustNode(t, v, k); n == nil || string(n.Value) != "v-"+k {
			t.Errorf("acknowledged %s after restart: %+v", k, n)
		}
	}
	for _, k := range []string{"/refused", "/refused2", "/zk-refused"} {
		if n := mustNode(t, v, k); n != nil {
			t.Errorf("refused write %s is in the state", k)
		}
	}
}

// A member whose disk fills, follower or leader, holds what it receives
// and refuses its own clients' writes, while the other two keep
// committing (writes through a leader whose disk is full are committed by
// its followers); once its disk takes writes again it catches up without
// a restart.
func TestMemberWithAFullDiskCatchesUp(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) { testFullDiskCatchesUp(t, role == "leader") })
	}
}

func testFullDiskCatchesUp(t *testing.T, fullLeader bool) {
	c := newReplicaCluster(t)
	// Which member's disk fills is decided once a leader is known.
	var disk diskFault
	var target atomic.Uint64
	for id := uint64(1); id <= 3; id++ {
		c.start(id, func(cfg *MemberConfig) {
			cfg.SpaceFault = func() error {
				if target.Load() != id {
					return nil
				}
				return disk.check()
			}
		})
	}
	c.propose(c.members[1], putOp("/a", "1", 0))
	c.settle()
	var leader *Member
	var followers []*Member
	for _, m := range c.members {
		if m.Status().LeaderID == m.cfg.ID {
			leader = m
		} else {
			followers = append(followers, m)
		}
	}
	if leader == nil || len(followers) != 2 {
		t.Fatal("no leader after a commit")
	}
	full, writer := followers[0], leader
	if fullLeader {
		full, writer = leader, followers[0]
	}
	target.Store(full.cfg.ID)
	disk.full.Store(true)
	for i := range 20 {
		c.propose(writer, putOp(fmt.Sprintf("/k%d", i), "v", 0))
	}
	if _, err := full.Propose(context.Background(), putOp("/refused", "v", 0)); !errors.Is(err, core.ErrNoSpace) {
		t.Fatalf("write through the full member: %v, want core.ErrNoSpace", err)
	}
	if !slices.Contains(full.Status().Alarms, "NOSPACE") || full.Status().Err != nil {
		t.Fatalf("full member's status: %+v", full.Status())
	}
	v, err := full.Read(context.Background(), 0)
	if err != nil {
		t.Fatalf("read on the full member: %v", err)
	}
	mustNode(t, v, "/a")
	v.Close()

	disk.full.Store(false)
	c.settle()
	v, err = full.Read(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for i := range 20 {
		if n := mustNode(t, v, fmt.Sprintf("/k%d", i)); n == nil {
			t.Errorf("/k%d missing on the member whose disk was full", i)
		}
	}
	if n := mustNode(t, v, "/refused"); n != nil {
		t.Error("the refused write was committed")
	}
}

// On a real small file system, filling it below the reserve raises
// NOSPACE and refuses writes that grow the state while reads and deletes
// go on, and freeing space clears it, with no restart. (A tmpfs cannot be remounted read-only while Badger
// holds files open for writing; diskspace's tests cover a read-only
// mount.)
func TestDiskFullOnATmpfs(t *testing.T) {
	const reserve = 32 << 20
	mnt := testenv.MountTmpfs(t, 128<<20)
	dir := filepath.Join(mnt, "data")
	m, err := OpenMember(MemberConfig{DataDir: dir, Logger: testlog.New(t), SpaceReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	for _, k := range []string{"/a", "/b"} {
		if _, err := m.Propose(ctx, putOp(k, "1", 0)); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(why string) {
		t.Helper()
		if _, err := m.Propose(ctx, putOp("/refused", "v", 0)); !errors.Is(err, core.ErrNoSpace) {
			t.Fatalf("write with the disk %s: %v, want core.ErrNoSpace", why, err)
		}
		if st := m.Status(); st.Err != nil || !slices.Contains(st.Alarms, "NOSPACE") {
			t.Fatalf("status with the disk %s: err %v, alarms %v", why, st.Err, st.Alarms)
		}
		v, err := m.Read(ctx, 0)
		if err != nil {
			t.Fatalf("read with the disk %s: %v", why, err)
		}
		defer v.Close()
		if n := mustNode(t, v, "/a"); n == nil {
			t.Fatalf("/a missing with the disk %s", why)
		}
	}
	accepted := func(key string) {
		t.Helper()
		if _, err := m.Propose(ctx, putOp(key, "v", 0)); err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
		if st := m.Status(); len(st.Alarms) != 0 {
			t.Fatalf("alarms %v after a write went through", st.Alarms)
		}
	}

	// Full to within three quarters of the reserve: deletes still go
	// through (they use the lower half).
	filler := filepath.Join(mnt, "filler")
	n := testenv.FillDisk(t, filler)
	if err := os.Truncate(filler, n-reserve*3/4); err != nil {
		t.Fatal(err)
	}
	refused("below its reserve")
	del := &core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpDelete, Key: []byte("/b"), ExpectedVersion: -1}}}}
	if res, err := m.Propose(ctx, del); err != nil || res.Err != nil {
		t.Fatalf("delete below the reserve: %v, %v; want it to go through", err, res)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	accepted("/after-full")

}

func TestFreesSpace(t *testing.T) {
	del := core.TxnOp{Kind: core.OpDeleteRange, Key: []byte("a"), End: []byte("b")}
	put := core.TxnOp{Kind: core.OpPut, Key: []byte("a"), Value: []byte("v")}
	rng := core.TxnOp{Kind: core.OpRange, Key: []byte("a")}
	for _, tc := range []struct {
		name string
		op   *core.Op
		want bool
	}{
		{"put", putOp("/a", "v", 0), false},
		{"delete", &core.Op{Txn: &core.Txn{Success: []core.TxnOp{del}}}, true},
		{"txn deleting or reading", &core.Op{Txn: &core.Txn{Success: []core.TxnOp{del}, Failure: []core.TxnOp{rng}}}, true},
		{"txn putting on failure", &core.Op{Txn: &core.Txn{Success: []core.TxnOp{del}, Failure: []core.TxnOp{put}}}, false},
		{"nested txn with a put", &core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpTxn, Txn: &core.Txn{Success: []core.TxnOp{put}}}}}}, false},
		{"zookeeper create", &core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpCreate, Key: []byte("/a")}}}}, false},
		{"lease grant", &core.Op{LeaseGrant: &core.LeaseGrant{ID: 1, TTL: 10}}, false},
		{"lease revoke", &core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 1}}, true},
		{"compact", &core.Op{Compact: &core.Compact{Rev: 2}}, true},
		{"alarm disarm", &core.Op{Alarm: &core.AlarmChange{Alarm: core.Alarm{Member: 1, Type: core.AlarmNoSpace}}}, true},
	} {
		if got := freesSpace(tc.op); got != tc.want {
			t.Errorf("%s: freesSpace = %v, want %v", tc.name, got, tc.want)
		}
	}
}
