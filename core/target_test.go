package core_test

import (
	"errors"
	"testing"

	"github.com/januskv/janus/core"
)

// failingView is a View whose node reads fail, as a broken disk's would.
type failingView struct{ core.View }

var errDisk = errors.New("disk on fire")

func (failingView) Node([]byte) (*core.Node, error) { return nil, errDisk }

// TestZKTarget: the one rule for a ZooKeeper request's target, which Apply
// and the ZooKeeper face's reads share. A missing node is NoNode before any
// permission is looked at; an ACL or an etcd role that keeps the node from
// the caller is NoAuth; a failed read is never taken for a refusal.
func TestZKTarget(t *testing.T) {
	h := newHarness(t)
	alice := core.ID{Scheme: "digest", ID: "alice:hash"}
	locked := create("/locked", "v")
	locked.Create.ACL = []core.ACL{{Perms: core.PermRead, ID: alice}}
	if res := h.zk(locked, create("/open", "v"), create("/roles", "v")); res.Err != nil {
		t.Fatalf("setup: %v", res.Err)
	}
	// An etcd put makes /a an implicit parent.
	if res := h.txn(put("/a/b", "v")); res.Err != nil {
		t.Fatalf("setup: %v", res.Err)
	}
	// With etcd auth on, a role's permission covers /roles: a session
	// reads it only as an etcd user with that right, or as super.
	roles := &core.AuthState{
		Enabled: true, Rev: 2,
		Users: []core.AuthUser{{Name: "reader", Roles: []string{"r"}}, {Name: "writer", Roles: []string{"w"}}},
		Roles: []core.AuthRole{
			{Name: "r", Perms: []core.AuthPerm{perm(core.AuthRead, "/roles", "")}},
			{Name: "w", Perms: []core.AuthPerm{perm(core.AuthWrite, "/roles", "")}},
		},
	}
	off := &core.AuthState{Rev: 1}
	anyone := []core.ID{{Scheme: "ip", ID: "127.0.0.1"}}
	reader := []core.ID{{Scheme: core.EtcdScheme, ID: "reader"}}
	writer := []core.ID{{Scheme: core.EtcdScheme, ID: "writer"}}
	super := []core.ID{{Scheme: "super"}}

	cases := []struct {
		name string
		view core.View
		st   *core.AuthState
		key  string
		perm core.Perm
		auth []core.ID
		want core.Code // 0xff: a failed read
	}{
		{"open node", h.m, off, "/open", core.PermRead, anyone, core.CodeOK},
		{"missing node", h.m, off, "/missing", core.PermRead, anyone, core.CodeNoNode},
		{"missing node under a role", h.m, roles, "/roles/missing", core.PermRead, anyone, core.CodeNoNode},
		{"implicit parent", h.m, off, "/a", core.PermRead, anyone, core.CodeOK},
		{"root", h.m, off, "/", core.PermAdmin, anyone, core.CodeOK},
		{"ACL denies", h.m, off, "/locked", core.PermRead, anyone, core.CodeNoAuth},
		{"ACL grants read", h.m, off, "/locked", core.PermRead, []core.ID{alice}, core.CodeOK},
		{"ACL grants read, not write", h.m, off, "/locked", core.PermWrite, []core.ID{alice}, core.CodeNoAuth},
		{"any one bit asked suffices (getACL)", h.m, off, "/locked", core.PermRead | core.PermAdmin, []core.ID{alice}, core.CodeOK},
		{"no bit asked granted", h.m, off, "/locked", core.PermWrite | core.PermAdmin, []core.ID{alice}, core.CodeNoAuth},
		{"super passes ACLs", h.m, off, "/locked", core.PermAll, super, core.CodeOK},
		{"etcd auth off ignores roles", h.m, off, "/roles", core.PermRead, anyone, core.CodeOK},
		{"role hides from a plain session", h.m, roles, "/roles", core.PermRead, anyone, core.CodeNoAuth},
		{"role grants its reader", h.m, roles, "/roles", core.PermRead, reader, core.CodeOK},
		{"reader may not write", h.m, roles, "/roles", core.PermWrite, reader, core.CodeNoAuth},
		{"writer may write", h.m, roles, "/roles", core.PermWrite, writer, core.CodeOK},
		{"writer may not read", h.m, roles, "/roles", core.PermRead, writer, core.CodeNoAuth},
		{"super passes roles", h.m, roles, "/roles", core.PermRead, super, core.CodeOK},
		{"uncovered key under roles", h.m, roles, "/open", core.PermRead, anyone, core.CodeOK},
		{"nil auth is not subject to roles", h.m, roles, "/roles", core.PermRead, nil, core.CodeOK},
		{"failed read", failingView{h.m}, off, "/open", core.PermRead, anyone, 0xff},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, d, err := core.ZKTarget(c.view, c.st, []byte(c.key), c.perm, c.auth)
			switch {
			case c.want == 0xff:
				if !errors.Is(err, errDisk) || core.IsRefusal(err) {
					t.Fatalf("err = %v (refusal %v), want the read failure, not a refusal", err, core.IsRefusal(err))
				}
			case c.want == core.CodeOK:
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				wn, wd, werr := core.TreeNode(c.view, []byte(c.key))
				if werr != nil || n == nil || string(n.Key) != string(wn.Key) || n.ModRev != wn.ModRev || (d == nil) != (wd == nil) {
					t.Fatalf("got %+v %+v, want TreeNode's %+v %+v (%v)", n, d, wn, wd, werr)
				}
			default:
				if !core.IsRefusal(err) || core.CodeOf(err) != c.want {
					t.Fatalf("err = %v (refusal %v), want a %v refusal", err, core.IsRefusal(err), c.want)
				}
				if n != nil || d != nil {
					t.Fatalf("a refusal returned a node: %+v %+v", n, d)
				}
			}
		})
	}
}
