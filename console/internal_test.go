package console

import (
	"testing"

	"github.com/januskv/janus/core"
)

func TestReadOverlaps(t *testing.T) {
	st := &core.AuthState{
		Enabled: true,
		Users: []core.AuthUser{
			{Name: "alice", Roles: []string{"a"}},
			{Name: "root", Roles: []string{core.RootName}},
			{Name: "writer", Roles: []string{"w"}},
		},
		Roles: []core.AuthRole{
			{Name: "a", Perms: []core.AuthPerm{
				{Type: core.AuthRead, Key: []byte("/team/a/"), End: []byte("/team/a0")},
				{Type: core.AuthReadWrite, Key: []byte("/one")},
				{Type: core.AuthRead, Key: []byte("/zz/"), End: []byte{0}},
			}},
			{Name: core.RootName},
			{Name: "w", Perms: []core.AuthPerm{{Type: core.AuthWrite, Key: []byte("/"), End: []byte{0}}}},
		},
	}
	for _, tc := range []struct {
		user, key, end string
		want           bool
	}{
		{"alice", "/", "0", true},                // the root leads to all of them
		{"alice", "/team/", "/team0", true},      // leads to /team/a/
		{"alice", "/team/b/", "/team/b0", false}, // beside it
		{"alice", "/one/", "/one0", false},       // /one is a single key, nothing below it
		{"alice", "/", "/one", false},            // [/, /one) holds neither /one nor /zz/ nor /team/a/
		{"alice", "/zzz/", "/zzz0", true},        // /zz/ reaches to the end of the keyspace
		{"root", "/anything/", "/anything0", true},
		{"writer", "/", "0", false}, // write-only grants no reading
		{"nobody", "/", "0", false},
	} {
		if got := readOverlaps(st, tc.user, []byte(tc.key), []byte(tc.end)); got != tc.want {
			t.Errorf("readOverlaps(%s, [%q, %q)) = %v, want %v", tc.user, tc.key, tc.end, got, tc.want)
		}
	}
}

func TestRecipeNames(t *testing.T) {
	for _, tc := range []struct {
		name, recipe string
		seq          string
	}{
		{"0f1e2d3c4b5a69788796a5b4c3d2e1f0__lock__0000000007", "kazoo Lock/Election", "0000000007"},
		{"0f1e2d3c4b5a69788796a5b4c3d2e1f0__rlock__0000000002", "kazoo Lock/Election", "0000000002"},
		{"_c_3f2b1a90-1c2d-4e5f-8a9b-0c1d2e3f4a5b-lock-0000000003", "Curator InterProcessMutex/LeaderSelector", "0000000003"},
		{"lock-0000000004", "Curator InterProcessMutex/LeaderSelector", "0000000004"},
		{"_c_3f2b1a90-1c2d-4e5f-8a9b-0c1d2e3f4a5b-latch-0000000000", "Curator LeaderLatch", "0000000000"},
		{"member-0000000001", "", ""},
		{"lock-12", "", ""},
	} {
		recipe, seq := "", ""
		for _, rc := range recipes {
			if m := rc.re.FindStringSubmatch(tc.name); m != nil {
				recipe, seq = rc.name, m[1]
			}
		}
		if recipe != tc.recipe || seq != tc.seq {
			t.Errorf("%s: recognized as %q seq %q, want %q seq %q", tc.name, recipe, seq, tc.recipe, tc.seq)
		}
	}
}

func TestBothFaces(t *testing.T) {
	node := func(k string) *core.Node { return &core.Node{Key: []byte(k), Version: 1} }
	for _, tc := range []struct {
		what     string
		ev       core.Event
		wantEtcd string
		wantZK   []zkEvent
	}{
		{"create", core.Event{Type: core.EventPut, Node: node("/a/b")}, "PUT",
			[]zkEvent{{"NodeCreated", "/a/b"}, {"NodeChildrenChanged", "/a"}}},
		{"change", core.Event{Type: core.EventPut, Node: node("/a/b"), Prev: node("/a/b")}, "PUT",
			[]zkEvent{{"NodeDataChanged", "/a/b"}}},
		{"implicit parent becomes stored", core.Event{Type: core.EventPut, Node: node("/a"), WasImplicit: true}, "PUT",
			[]zkEvent{{"NodeDataChanged", "/a"}}},
		{"implicit parent appears", core.Event{Type: core.EventPut, Node: node("/a"), Implicit: true}, "",
			[]zkEvent{{"NodeCreated", "/a"}, {"NodeChildrenChanged", "/"}}},
		{"delete", core.Event{Type: core.EventDelete, Node: node("/a/b")}, "DELETE",
			[]zkEvent{{"NodeDeleted", "/a/b"}, {"NodeChildrenChanged", "/a"}}},
		{"non-path key", core.Event{Type: core.EventPut, Node: node("k")}, "PUT", nil},
	} {
		got := bothFaces(7, tc.ev)
		etcd := ""
		if got.Etcd != nil {
			etcd = got.Etcd.Type
		}
		if etcd != tc.wantEtcd || len(got.ZK) != len(tc.wantZK) {
			t.Errorf("%s: etcd %q zk %v, want %q %v", tc.what, etcd, got.ZK, tc.wantEtcd, tc.wantZK)
			continue
		}
		for i := range tc.wantZK {
			if got.ZK[i] != tc.wantZK[i] {
				t.Errorf("%s: zk %v, want %v", tc.what, got.ZK, tc.wantZK)
			}
		}
	}
}
