package core_test

import (
	"slices"
	"testing"

	"github.com/januskv/janus/core"
)

// TestSystemNodes: ZooKeeper's system nodes exist on a brand-new state
// (revision 1, no stored node), are listed and counted once whether or not
// data has been stored at one, and stay when their last child or their
// stored node goes.
func TestSystemNodes(t *testing.T) {
	h := newHarness(t)
	check := func(when string, path string, wantKids []string) {
		t.Helper()
		n, d, err := core.TreeNode(h.m, []byte(path))
		if err != nil || n == nil {
			t.Fatalf("%s: %s is missing: %v", when, path, err)
		}
		if path != "/" && n.Value == nil {
			// ZooKeeper's are new byte[0]; Curator cannot read a null
			// /zookeeper/config.
			t.Fatalf("%s: %s has null data, want empty", when, path)
		}
		var kids []string
		if err := core.TreeChildren(h.m, []byte(path), func(name []byte) bool { kids = append(kids, string(name)); return true }); err != nil {
			t.Fatal(err)
		}
		num := int32(0)
		if d != nil {
			num = d.NumChildren
		}
		if !slices.Equal(kids, wantKids) || num != int32(len(wantKids)) {
			t.Fatalf("%s: %s lists %q and counts %d children, want %q", when, path, kids, num, wantKids)
		}
	}
	checkAll := func(when string, quotaKids ...string) {
		t.Helper()
		check(when, "/", []string{"zookeeper"})
		check(when, "/zookeeper", []string{"config", "quota"})
		check(when, "/zookeeper/config", nil)
		check(when, "/zookeeper/quota", quotaKids)
	}
	if h.rev() != 1 {
		t.Fatalf("brand-new revision %d", h.rev())
	}
	checkAll("brand-new")
	n, _, _ := core.TreeNode(h.m, []byte("/zookeeper/config"))
	zkClient := []core.ID{{Scheme: "ip", ID: "127.0.0.1"}}
	if core.CheckACL(n.ACL, core.PermWrite, zkClient) || !core.CheckACL(n.ACL, core.PermRead, zkClient) || n.CreateRev != 0 {
		t.Fatalf("/zookeeper/config: %+v, want read-only, created at 0", n)
	}

	create := func(path string) core.TxnOp {
		return core.TxnOp{Kind: core.OpCreate, Key: []byte(path), Value: []byte("n=1")}
	}
	if res := h.zk(create("/zookeeper/quota/app"), create("/zookeeper/quota/app/zookeeper_limits")); res.Err != nil {
		t.Fatalf("quota nodes: %v", res.Err)
	}
	checkAll("with quota nodes", "app")
	if res := h.zk(core.TxnOp{Kind: core.OpDelete, Key: []byte("/zookeeper/quota/app/zookeeper_limits"), ExpectedVersion: -1},
		core.TxnOp{Kind: core.OpDelete, Key: []byte("/zookeeper/quota/app"), ExpectedVersion: -1}); res.Err != nil {
		t.Fatalf("delete quota nodes: %v", res.Err)
	}
	checkAll("after the quota nodes went")

	// Data written to a system node stores it (an etcd key from then
	// on); deleting that key leaves the system node.
	if res := h.zk(core.TxnOp{Kind: core.OpSetData, Key: []byte("/zookeeper"), Value: []byte("x"), ExpectedVersion: -1}); res.Err != nil {
		t.Fatalf("setData /zookeeper: %v", res.Err)
	}
	checkAll("with /zookeeper stored")
	if h.node("/zookeeper") == nil {
		t.Fatal("setData did not store /zookeeper")
	}
	h.txn(core.TxnOp{Kind: core.OpDeleteRange, Key: []byte("/zookeeper")})
	checkAll("after its key was deleted")
}
