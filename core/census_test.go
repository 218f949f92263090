package core_test

import (
	"testing"

	"github.com/januskv/janus/core"
)

// TestCensusCounts checks what each count covers, against ZooKeeper's own
// figures for a fresh server (5 znodes, 44 bytes) and an etcd key outside
// the tree.
func TestCensusCounts(t *testing.T) {
	fresh, err := core.CountCensus(core.NewMemState())
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ZnodeCount() != 5 || fresh.DataSize() != 44 || fresh.Keys != 0 {
		t.Fatalf("fresh state: %d znodes, %d bytes, %d keys; ZooKeeper reports 5 and 44, etcd 0", fresh.ZnodeCount(), fresh.DataSize(), fresh.Keys)
	}
	for _, tc := range []struct {
		name string
		n    *core.Node
		want core.Census
	}{
		{"etcd key outside the tree", &core.Node{Key: []byte("k"), Value: []byte("v")}, core.Census{Keys: 1}},
		{"znode", &core.Node{Key: []byte("/a"), Value: []byte("vv")}, core.Census{Keys: 1, Znodes: 1, DataBytes: 4}},
		{"ephemeral", &core.Node{Key: []byte("/e"), Lease: 7}, core.Census{Keys: 1, Znodes: 1, Ephemerals: 1, DataBytes: 2}},
		{"system node's data", &core.Node{Key: []byte("/zookeeper/quota"), Value: []byte("q")}, core.Census{Keys: 1, DataBytes: 1}},
		{"root", &core.Node{Key: []byte("/"), Value: []byte("r")}, core.Census{Keys: 1}},
	} {
		var c core.Census
		c.AddNode(tc.n, 1)
		if c != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, c, tc.want)
		}
		if c.AddNode(tc.n, -1); c != (core.Census{}) {
			t.Errorf("%s: counting in and out leaves %+v", tc.name, c)
		}
	}
	var c core.Census
	c.AddLease(&core.Lease{ID: 1}, 1)
	c.AddLease(&core.Lease{ID: 2, Session: &core.Session{}}, 1)
	if c.Leases != 2 || c.Sessions != 1 {
		t.Errorf("a lease and a session: %+v", c)
	}
}
