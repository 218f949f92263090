package core_test

import (
	"errors"
	"math"
	"testing"

	"github.com/januskv/janus/core"
)

// harness applies ops one entry at a time to a fresh MemState.
type harness struct {
	t     *testing.T
	m     *core.MemState
	index uint64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, m: core.NewMemState()} }

func (h *harness) apply(op core.Op) (*core.Result, *core.Batch) {
	h.t.Helper()
	h.index++
	res, b, err := h.m.ApplyEntry(&core.Entry{Index: h.index, Time: int64(1000 * h.index), Op: op})
	if err != nil {
		h.t.Fatalf("apply: %v", err)
	}
	return res, b
}

func (h *harness) txn(ops ...core.TxnOp) *core.Result {
	h.t.Helper()
	res, _ := h.apply(core.Op{Txn: &core.Txn{Success: ops}})
	return res
}

func (h *harness) zk(ops ...core.TxnOp) *core.Result {
	h.t.Helper()
	res, _ := h.apply(core.Op{Txn: &core.Txn{Success: ops, Auth: []core.ID{{Scheme: "ip", ID: "127.0.0.1"}}}})
	return res
}

func (h *harness) rev() int64 {
	h.t.Helper()
	m, err := h.m.Meta()
	if err != nil {
		h.t.Fatalf("meta: %v", err)
	}
	return m.Rev
}

// node reads key, failing the test if the read fails: a failed read must
// never pass for "the key is gone".
func (h *harness) node(key string) *core.Node {
	h.t.Helper()
	n, err := h.m.Node([]byte(key))
	if err != nil {
		h.t.Fatalf("read %s: %v", key, err)
	}
	return n
}

// tree reads the node at path and its Dir, failing the test if the read
// fails.
func (h *harness) tree(path string) (*core.Node, *core.Dir) {
	h.t.Helper()
	n, d, err := core.TreeNode(h.m, []byte(path))
	if err != nil {
		h.t.Fatalf("read %s: %v", path, err)
	}
	return n, d
}

func put(k, v string) core.TxnOp {
	return core.TxnOp{Kind: core.OpPut, Key: []byte(k), Value: []byte(v)}
}
func del(k string) core.TxnOp { return core.TxnOp{Kind: core.OpDeleteRange, Key: []byte(k)} }
func create(p, v string) core.TxnOp {
	return core.TxnOp{Kind: core.OpCreate, Key: []byte(p), Value: []byte(v), Create: &core.CreateOptions{}}
}
func zdel(p string, version int32) core.TxnOp {
	return core.TxnOp{Kind: core.OpDelete, Key: []byte(p), ExpectedVersion: version}
}
func setData(p, v string, version int32) core.TxnOp {
	return core.TxnOp{Kind: core.OpSetData, Key: []byte(p), Value: []byte(v), ExpectedVersion: version}
}

func wantCode(t *testing.T, res *core.Result, code core.Code) {
	t.Helper()
	if got := core.CodeOf(res.Err); got != code {
		t.Fatalf("got %v, want %v", got, code)
	}
}

func TestRevisionsMoveOnlyOnWrites(t *testing.T) {
	h := newHarness(t)
	if h.rev() != 1 {
		t.Fatalf("a new store is at revision %d, want 1", h.rev())
	}
	steps := []struct {
		name    string
		op      core.Op
		wantRev int64
	}{
		{"put", core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("a", "1")}}}, 2},
		{"same value again", core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("a", "1")}}}, 3},
		{"delete missing", core.Op{Txn: &core.Txn{Success: []core.TxnOp{del("nope")}}}, 3},
		{"read-only txn", core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpRange, Key: []byte("a")}}}}, 3},
		{"failed compare, no else", core.Op{Txn: &core.Txn{
			Compares: []core.Compare{{Key: []byte("a"), Target: core.CompareModRev, Result: core.CompareEqual, Int: 99}},
			Success:  []core.TxnOp{put("a", "x")}}}, 3},
		{"two puts one txn", core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("b", "1"), put("c", "1")}}}, 4},
		{"lease grant", core.Op{LeaseGrant: &core.LeaseGrant{ID: 7, TTL: 10}}, 4},
		{"revoke lease with no keys", core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 7}}, 4},
		{"compact", core.Op{Compact: &core.Compact{Rev: 3}}, 4},
	}
	for _, s := range steps {
		res, _ := h.apply(s.op)
		if res.Err != nil {
			t.Fatalf("%s: %v", s.name, res.Err)
		}
		if res.Rev != s.wantRev || h.rev() != s.wantRev {
			t.Fatalf("%s: revision %d (result %d), want %d", s.name, h.rev(), res.Rev, s.wantRev)
		}
	}
	n := h.node("b")
	c := h.node("c")
	if n.ModRev != 4 || c.ModRev != 4 {
		t.Fatalf("keys of one txn must share its revision: %d %d", n.ModRev, c.ModRev)
	}
	a := h.node("a")
	if a.Version != 2 || a.CreateRev != 2 || a.ModRev != 3 {
		t.Fatalf("a: version %d create %d mod %d", a.Version, a.CreateRev, a.ModRev)
	}
}

func TestCompares(t *testing.T) {
	h := newHarness(t)
	h.txn(put("k1", "v1"), put("k2", "v2"))
	cases := []struct {
		name string
		cmp  core.Compare
		want bool
	}{
		{"value equal", core.Compare{Key: []byte("k1"), Target: core.CompareValue, Value: []byte("v1")}, true},
		{"value on missing key is false even for !=", core.Compare{Key: []byte("zz"), Target: core.CompareValue, Result: core.CompareNotEqual, Value: []byte("v1")}, false},
		{"version of missing key is 0", core.Compare{Key: []byte("zz"), Target: core.CompareVersion, Int: 0}, true},
		{"mod of missing key is 0", core.Compare{Key: []byte("zz"), Target: core.CompareModRev, Int: 0}, true},
		{"range: all keys must hold", core.Compare{Key: []byte("k"), End: []byte("l"), Target: core.CompareValue, Result: core.CompareGreater, Value: []byte("v1")}, false},
		{"range: all hold", core.Compare{Key: []byte("k"), End: []byte("l"), Target: core.CompareVersion, Int: 1}, true},
		{"empty range compares zero key", core.Compare{Key: []byte("x"), End: []byte("y"), Target: core.CompareCreateRev, Result: core.CompareLess, Int: 1}, true},
		{"create rev greater", core.Compare{Key: []byte("k1"), Target: core.CompareCreateRev, Result: core.CompareGreater, Int: 1}, true},
		{"lease equal 0", core.Compare{Key: []byte("k1"), Target: core.CompareLease, Int: 0}, true},
	}
	for _, c := range cases {
		res, _ := h.apply(core.Op{Txn: &core.Txn{Compares: []core.Compare{c.cmp}}})
		if res.Succeeded != c.want {
			t.Errorf("%s: succeeded=%v, want %v", c.name, res.Succeeded, c.want)
		}
	}
}

func TestTxnOpsSeeEarlierWrites(t *testing.T) {
	h := newHarness(t)
	res := h.txn(put("a", "1"), core.TxnOp{Kind: core.OpRange, Key: []byte("a")}, del("a"), core.TxnOp{Kind: core.OpRange, Key: []byte("a")})
	if len(res.Ops[1].Nodes) != 1 || string(res.Ops[1].Nodes[0].Value) != "1" {
		t.Fatalf("range after put in the same txn: %+v", res.Ops[1])
	}
	if len(res.Ops[3].Nodes) != 0 {
		t.Fatalf("range after delete in the same txn still sees the key")
	}
	if res.Ops[0].Rev != 2 {
		t.Fatalf("op rev %d, want 2", res.Ops[0].Rev)
	}
}

func TestPutOptionsAndLeases(t *testing.T) {
	h := newHarness(t)
	wantCode(t, h.txn(core.TxnOp{Kind: core.OpPut, Key: []byte("a"), IgnoreValue: true}), core.CodeKeyNotFound)
	wantCode(t, h.txn(core.TxnOp{Kind: core.OpPut, Key: []byte("a"), Lease: 5}), core.CodeLeaseNotFound)
	if h.rev() != 1 {
		t.Fatalf("failed puts moved the revision to %d", h.rev())
	}
	h.apply(core.Op{LeaseGrant: &core.LeaseGrant{ID: 5, TTL: 10}})
	res, _ := h.apply(core.Op{LeaseGrant: &core.LeaseGrant{ID: 5, TTL: 10}})
	wantCode(t, res, core.CodeLeaseExists)
	h.txn(core.TxnOp{Kind: core.OpPut, Key: []byte("a"), Value: []byte("1"), Lease: 5}, core.TxnOp{Kind: core.OpPut, Key: []byte("/e/b"), Value: []byte("2"), Lease: 5})
	h.txn(core.TxnOp{Kind: core.OpPut, Key: []byte("a"), Value: []byte("new"), IgnoreLease: true})
	a := h.node("a")
	if a.Lease != 5 || string(a.Value) != "new" {
		t.Fatalf("ignore_lease put: %+v", a)
	}
	h.txn(core.TxnOp{Kind: core.OpPut, Key: []byte("c"), Value: []byte("3"), Lease: 5})
	h.txn(core.TxnOp{Kind: core.OpPut, Key: []byte("c"), Value: []byte("3")}) // detaches
	before := h.rev()
	res, b := h.apply(core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 5}})
	if res.Err != nil || res.Deleted != 2 || h.rev() != before+1 {
		t.Fatalf("revoke: %+v rev %d", res, h.rev())
	}
	var visible []string
	for _, e := range b.Events {
		if !e.Implicit {
			if e.Type != core.EventDelete || e.Node.ModRev != before+1 {
				t.Fatalf("revoke event %+v", e)
			}
			visible = append(visible, string(e.Node.Key))
		}
	}
	if len(visible) != 2 || visible[0] != "/e/b" || visible[1] != "a" {
		t.Fatalf("revoke deletes in key order in one revision, got %v", visible)
	}
	if c := h.node("c"); c == nil {
		t.Fatalf("a key detached from the lease was deleted by its revoke")
	}
	if n, _ := h.tree("/e"); n != nil {
		t.Fatalf("implicit parent /e outlived its last child")
	}
}

func TestZooKeeperCreateDeleteSetData(t *testing.T) {
	h := newHarness(t)
	wantCode(t, h.zk(create("/a/b", "x")), core.CodeNoNode)
	res := h.zk(create("/a", "x"))
	if res.Err != nil || string(res.Ops[0].Path) != "/a" {
		t.Fatalf("create /a: %+v", res)
	}
	wantCode(t, h.zk(create("/a", "y")), core.CodeNodeExists)
	h.zk(create("/a/b", ""))
	wantCode(t, h.zk(zdel("/a", -1)), core.CodeNotEmpty)
	wantCode(t, h.zk(setData("/a", "z", 5)), core.CodeBadVersion)
	res = h.zk(setData("/a", "z", 0))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st := core.StatOf(res.Ops[0].Node, res.Ops[0].Dir)
	if st.Version != 1 || st.NumChildren != 1 || st.Cversion != 1 || st.DataLength != 1 {
		t.Fatalf("stat after setData: %+v", st)
	}
	wantCode(t, h.zk(zdel("/a/b", 3)), core.CodeBadVersion)
	wantCode(t, h.zk(zdel("/a/b", 0)), core.CodeOK)
	n, d := h.tree("/a")
	st = core.StatOf(n, d)
	if st.Cversion != 2 || st.NumChildren != 0 || st.Pzxid != h.rev() {
		t.Fatalf("parent stat after child delete: %+v (rev %d)", st, h.rev())
	}
	wantCode(t, h.zk(zdel("/a", 1)), core.CodeOK)
	if n, _ := h.tree("/a"); n != nil {
		t.Fatal("/a still there")
	}
	// A re-created node starts a fresh child history.
	h.zk(create("/a", ""))
	n, d = h.tree("/a")
	if st := core.StatOf(n, d); st.Cversion != 0 || st.Pzxid != st.Czxid {
		t.Fatalf("re-created node inherited child metadata: %+v", st)
	}
}

func TestSequentialSuffixCountsEveryCreate(t *testing.T) {
	h := newHarness(t)
	h.zk(create("/q", ""))
	seq := func() string {
		op := create("/q/s-", "")
		op.Create.Sequential = true
		res := h.zk(op)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return string(res.Ops[0].Path)
	}
	if got := seq(); got != "/q/s-0000000000" {
		t.Fatalf("first sequential: %s", got)
	}
	h.zk(create("/q/plain", ""))
	h.zk(zdel("/q/plain", -1))
	h.zk(zdel("/q/s-0000000000", -1))
	if got := seq(); got != "/q/s-0000000002" {
		t.Fatalf("sequential after a plain create and deletes: %s", got)
	}
	n, d := h.tree("/q")
	if st := core.StatOf(n, d); st.Cversion != 5 {
		t.Fatalf("cversion counts creates and deletes: %d", st.Cversion)
	}
}

// TestSequentialSuffixAfterTheCounterWraps: ZooKeeper's counter is an
// int32 that wraps after 2^31-1 sequential children (a restored
// ZooKeeper data directory can bring one that far); its names are then
// Java's "%010d" of a negative number, padded after the sign.
func TestSequentialSuffixAfterTheCounterWraps(t *testing.T) {
	h := newHarness(t)
	h.zk(create("/q", ""))
	n, _ := h.tree("/q")
	d := &core.Dir{Pzxid: n.CreateRev, Seq: math.MaxInt32}
	h.m.Write(&core.Batch{Index: h.index, Dirs: []core.DirWrite{{Path: []byte("/q"), Dir: d}}})
	for _, want := range []string{"/q/s-2147483647", "/q/s--2147483648", "/q/s--2147483647"} {
		op := create("/q/s-", "")
		op.Create.Sequential = true
		res := h.zk(op)
		if res.Err != nil || string(res.Ops[0].Path) != want {
			t.Fatalf("sequential create: %q (%v), want %q", res.Ops[0].Path, res.Err, want)
		}
	}
	// -5 is where the padding shows.
	_, d = h.tree("/q")
	d.Seq = -5
	h.m.Write(&core.Batch{Index: h.index, Dirs: []core.DirWrite{{Path: []byte("/q"), Dir: d}}})
	op := create("/q/s-", "")
	op.Create.Sequential = true
	if res := h.zk(op); res.Err != nil || string(res.Ops[0].Path) != "/q/s--000000005" {
		t.Fatalf("sequential create at -5: %q (%v)", res.Ops[0].Path, res.Err)
	}
}

func TestMultiIsAllOrNothing(t *testing.T) {
	h := newHarness(t)
	h.zk(create("/m", ""))
	before := h.rev()
	res := h.zk(create("/m/1", ""), create("/m/2", ""), setData("/m/none", "x", -1), create("/m/3", ""))
	wantCode(t, res, core.CodeNoNode)
	if res.FailedOp != 2 {
		t.Fatalf("failed op %d, want 2", res.FailedOp)
	}
	if h.rev() != before {
		t.Fatal("a failed multi moved the revision")
	}
	if n := h.node("/m/1"); n != nil {
		t.Fatal("a failed multi left a write behind")
	}
	res = h.zk(create("/m/1", ""), setData("/m/1", "v", 0), create("/m/2", ""))
	if res.Err != nil || res.Rev != before+1 {
		t.Fatalf("multi: %+v", res)
	}
	for _, p := range []string{"/m/1", "/m/2"} {
		n := h.node(p)
		if n.CreateRev != before+1 {
			t.Fatalf("%s czxid %d, want %d: a multi's ops share one zxid", p, n.CreateRev, before+1)
		}
	}
}

func TestEphemeralsAndSessions(t *testing.T) {
	h := newHarness(t)
	h.apply(core.Op{LeaseGrant: &core.LeaseGrant{ID: 42, TTL: 10, Session: &core.Session{TimeoutMs: 10000, Password: []byte("pw")}}})
	eph := create("/eph", "")
	eph.Create.Lease = 42
	if res := h.zk(eph); res.Err != nil {
		t.Fatal(res.Err)
	}
	n, d := h.tree("/eph")
	if core.StatOf(n, d).EphemeralOwner != 42 {
		t.Fatal("ephemeralOwner is not the session")
	}
	wantCode(t, h.zk(create("/eph/child", "")), core.CodeNoChildrenForEphemerals)
	gone := create("/gone", "")
	gone.Create.Lease = 43
	wantCode(t, h.zk(gone), core.CodeSessionExpired)
	ctr := create("/ctr", "")
	ctr.Create.Mode = core.ModeContainer
	h.zk(ctr)
	n, d = h.tree("/ctr")
	if core.StatOf(n, d).EphemeralOwner != 0 {
		t.Fatal("containers report ephemeralOwner 0")
	}
	h.apply(core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 42}})
	if n := h.node("/eph"); n != nil {
		t.Fatal("session end left its ephemeral")
	}
}

func TestImplicitParents(t *testing.T) {
	h := newHarness(t)
	_, b := h.apply(core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("/a/b/c", "v")}}})
	var kinds []string
	for _, e := range b.Events {
		k := string(e.Node.Key)
		if e.Implicit {
			k += "(implicit)"
		}
		kinds = append(kinds, k)
	}
	if want := "[/a(implicit) /a/b(implicit) /a/b/c]"; fmtList(kinds) != want {
		t.Fatalf("events %v, want %s", kinds, want)
	}
	n, d := h.tree("/a/b")
	if n == nil || !n.Implicit || core.StatOf(n, d).NumChildren != 1 {
		t.Fatalf("/a/b: %+v %+v", n, d)
	}
	// etcd ranges do not return implicit parents.
	var keys []string
	_ = h.m.Range(nil, nil, func(n *core.Node) bool { keys = append(keys, string(n.Key)); return true })
	if fmtList(keys) != "[/a/b/c]" {
		t.Fatalf("range sees %v", keys)
	}
	// ZooKeeper may create under an implicit parent and may not delete it.
	if res := h.zk(create("/a/b/d", "")); res.Err != nil {
		t.Fatal(res.Err)
	}
	wantCode(t, h.zk(zdel("/a/b", -1)), core.CodeNotEmpty)
	h.txn(del("/a/b/c"))
	h.zk(zdel("/a/b/d", -1))
	for _, p := range []string{"/a", "/a/b"} {
		if n, _ := h.tree(p); n != nil {
			t.Fatalf("%s outlived its last child", p)
		}
	}
	// A stored parent deleted by etcd while it has children becomes implicit.
	h.txn(put("/p", "v"), put("/p/q", "v"))
	h.txn(del("/p"))
	if n, _ := h.tree("/p"); n == nil || !n.Implicit {
		t.Fatalf("/p should be implicit now: %+v", n)
	}
	checkInvariants(t, h.m)
}

func TestACLs(t *testing.T) {
	h := newHarness(t)
	locked := create("/locked", "")
	locked.Create.ACL = []core.ACL{{Perms: core.PermRead, ID: core.ID{Scheme: "digest", ID: "alice:hash"}}}
	h.zk(locked)
	wantCode(t, h.zk(create("/locked/child", "")), core.CodeNoAuth)
	wantCode(t, h.zk(setData("/locked", "x", -1)), core.CodeNoAuth)
	alice := []core.ID{{Scheme: "digest", ID: "alice:hash"}}
	res, _ := h.apply(core.Op{Txn: &core.Txn{Auth: alice, Success: []core.TxnOp{setData("/locked", "x", -1)}}})
	wantCode(t, res, core.CodeNoAuth) // read only
	res, _ = h.apply(core.Op{Txn: &core.Txn{Auth: alice, Success: []core.TxnOp{{Kind: core.OpGet, Key: []byte("/locked")}}}})
	wantCode(t, res, core.CodeOK)
	// etcd requests are not subject to ACLs.
	if res := h.txn(put("/locked", "etcd")); res.Err != nil {
		t.Fatal(res.Err)
	}
	if !core.CheckACL([]core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "ip", ID: "10.0.0.0/8"}}}, core.PermRead, []core.ID{{Scheme: "ip", ID: "10.1.2.3"}}) {
		t.Fatal("ip ACL with a prefix does not match an address in it")
	}
}

func TestCompactBounds(t *testing.T) {
	h := newHarness(t)
	h.txn(put("a", "1"))
	res, _ := h.apply(core.Op{Compact: &core.Compact{Rev: 5}})
	if !errors.Is(res.Err, core.ErrFutureRev) {
		t.Fatalf("compact beyond the revision: %v", res.Err)
	}
	// etcd takes a compaction to 0 once, on a store never compacted,
	// and the flag saying so must survive the stored form.
	for i, want := range []core.Code{core.CodeOK, core.CodeCompacted} {
		res, _ = h.apply(core.Op{Compact: &core.Compact{Rev: 0}})
		if got := core.CodeOf(res.Err); got != want {
			t.Fatalf("compact to 0, time %d: %v, want code %v", i+1, res.Err, want)
		}
		m, _ := h.m.Meta()
		if back, err := core.DecodeMeta(core.AppendMeta(nil, m)); err != nil || back.Compacted != m.Compacted || !m.Compacted {
			t.Fatalf("meta round trip of %+v: %+v, %v", m, back, err)
		}
	}
	if res, _ = h.apply(core.Op{Compact: &core.Compact{Rev: -1}}); !errors.Is(res.Err, core.ErrCompacted) {
		t.Fatalf("compact to -1: %v", res.Err)
	}
	res, b := h.apply(core.Op{Compact: &core.Compact{Rev: 2}})
	if res.Err != nil || b.Compact != 2 {
		t.Fatalf("compact: %v %+v", res.Err, b)
	}
	res, _ = h.apply(core.Op{Compact: &core.Compact{Rev: 2}})
	if !errors.Is(res.Err, core.ErrCompacted) {
		t.Fatalf("compact again: %v", res.Err)
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

func TestPutOverImplicitParentIsMarked(t *testing.T) {
	h := newHarness(t)
	h.txn(put("/a/b", "v"))
	_, b := h.apply(core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("/a", "now stored")}}})
	if len(b.Events) != 1 || !b.Events[0].WasImplicit || b.Events[0].Prev != nil {
		t.Fatalf("events %+v: want one put with no Prev marked WasImplicit", b.Events)
	}
	_, b = h.apply(core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("/c", "new")}}})
	if b.Events[0].WasImplicit {
		t.Fatal("a brand-new key is marked WasImplicit")
	}
}

func TestSequentialCreateOfADirectoryPath(t *testing.T) {
	h := newHarness(t)
	h.zk(create("/q", ""))
	op := create("/q/", "")
	op.Create.Sequential = true
	res := h.zk(op)
	if res.Err != nil || string(res.Ops[0].Path) != "/q/0000000000" {
		t.Fatalf("create -s /q/: %+v", res)
	}
}

// TestTxnRangeAtRevisionIsCheckedFirst: a range at a revision the state
// cannot show refuses the whole Txn before any op runs, so its writes are
// not made, whichever branch or nesting level the range sits in; a readable
// one is left for the caller to read at that revision.
func TestTxnRangeAtRevisionIsCheckedFirst(t *testing.T) {
	at := func(rev int64) core.TxnOp {
		return core.TxnOp{Kind: core.OpRange, Key: []byte("a"), Range: &core.RangeOptions{Rev: rev}}
	}
	nested := func(ops ...core.TxnOp) core.TxnOp {
		return core.TxnOp{Kind: core.OpTxn, Txn: &core.Txn{Success: ops}}
	}
	for _, tc := range []struct {
		name string
		ops  []core.TxnOp
		want core.Code
	}{
		{"future", []core.TxnOp{put("w", "x"), at(5)}, core.CodeFutureRev},
		{"compacted", []core.TxnOp{put("w", "x"), at(2)}, core.CodeCompacted},
		{"nested compacted", []core.TxnOp{put("w", "x"), nested(put("v", "y"), at(1))}, core.CodeCompacted},
		{"first refusal wins", []core.TxnOp{at(9), at(1)}, core.CodeFutureRev},
		{"missing lease before the range", []core.TxnOp{{Kind: core.OpPut, Key: []byte("w"), Lease: 7}, at(9)}, core.CodeLeaseNotFound},
		{"compaction point", []core.TxnOp{put("w", "x"), at(3)}, core.CodeOK},
		{"current", []core.TxnOp{put("w", "x"), at(4)}, core.CodeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.txn(put("a", "1"))
			h.txn(put("a", "2"))
			h.txn(put("a", "3")) // revision 4
			if res, _ := h.apply(core.Op{Compact: &core.Compact{Rev: 3}}); res.Err != nil {
				t.Fatalf("compact: %v", res.Err)
			}
			res := h.txn(tc.ops...)
			if got := core.CodeOf(res.Err); got != tc.want {
				t.Fatalf("txn: %v (code %v), want code %v", res.Err, got, tc.want)
			}
			if tc.want != core.CodeOK {
				if h.rev() != 4 || h.node("w") != nil || h.node("v") != nil {
					t.Fatalf("a refused Txn wrote: rev %d", h.rev())
				}
				return
			}
			if h.node("w") == nil {
				t.Fatal("an accepted Txn did not write")
			}
			if r := res.Ops[1]; r.Kind != core.OpRange || r.Nodes != nil || r.Count != 0 {
				t.Fatalf("a range at a revision read the current state: %+v", r)
			}
		})
	}
}
