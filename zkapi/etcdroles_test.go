package zkapi_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"golang.org/x/crypto/bcrypt"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// TestEtcdRolesHideKeysFromExistsAndCounts holds ZooKeeper's reads that
// reveal a znode without reading it (exists, the names getChildren lists,
// the count getAllChildrenNumber gives) to etcd's role permissions, as
// etcd holds count_only and keys_only ranges: with etcd auth on, a key a
// role covers is not revealed to a session without the etcd right to read
// it, and the whole answer is NoAuth, as etcd refuses a whole range for
// one unreadable key. ZooKeeper ACLs alone still let exists through, as
// in ZooKeeper.
func TestEtcdRolesHideKeysFromExistsAndCounts(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	zc, _ := connect(t, j.Addr, 10*time.Second)
	for _, p := range []string{"/zz", "/zz/open", "/zz/secret"} {
		if _, err := zc.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	if _, err := zc.Create("/closed", nil, 0, zk.DigestACL(zk.PermAll, "someone", "pw")); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("alicepw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, ch := range []core.AuthChange{
		{Kind: core.AuthUserAdd, User: "root", Password: hash},
		{Kind: core.AuthUserGrantRole, User: "root", Role: core.RootName},
		{Kind: core.AuthUserAdd, User: "alice", Password: hash},
		// Role "seer" covers /zz/secret and the missing /zz/gone alone;
		// only alice has it.
		{Kind: core.AuthRoleAdd, Role: "seer"},
		{Kind: core.AuthRoleGrantPermission, Role: "seer", Perm: core.AuthPerm{Type: core.AuthRead, Key: []byte("/zz/secret")}},
		{Kind: core.AuthRoleGrantPermission, Role: "seer", Perm: core.AuthPerm{Type: core.AuthRead, Key: []byte("/zz/gone")}},
		{Kind: core.AuthUserGrantRole, User: "alice", Role: "seer"},
		{Kind: core.AuthEnable, TokenKey: []byte("0123456789abcdef0123456789abcdef")},
	} {
		res, err := j.Member.Propose(ctx, &core.Op{Auth: &ch})
		if err != nil || res.Err != nil {
			t.Fatalf("auth change %v: %v %v", ch.Kind, err, res.Err)
		}
	}

	anon := dialRaw(t, j.Addr)
	anon.handshake(jute.ConnectRequest{TimeOut: 10000})
	alice := dialRaw(t, j.Addr)
	alice.handshake(jute.ConnectRequest{TimeOut: 10000})
	if h := alice.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: core.EtcdScheme, Auth: []byte("alice:alicepw")}, nil); h.Err != jute.CodeOk {
		t.Fatalf("addauth etcd alice: %v", h.Err)
	}
	exists := func(c *rawClient, path string) jute.Code {
		return c.call(jute.OpExists, &jute.ExistsRequest{Path: path}, &jute.ExistsResponse{}).Err
	}
	kids := func(c *rawClient, path string) jute.Code {
		return c.call(jute.OpGetChildren, &jute.GetChildrenRequest{Path: path}, &jute.GetChildrenResponse{}).Err
	}
	kids2 := func(c *rawClient, path string) jute.Code {
		return c.call(jute.OpGetChildren2, &jute.GetChildren2Request{Path: path}, &jute.GetChildren2Response{}).Err
	}
	count := func(c *rawClient, path string) jute.Code {
		return c.call(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: path}, &jute.GetAllChildrenNumberResponse{}).Err
	}
	multiKids := func(c *rawClient, path string) jute.Code {
		var resp jute.MultiResponse
		if h := c.call(jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpGetChildren, Request: &jute.GetChildrenRequest{Path: path}}}}, &resp); h.Err != jute.CodeOk {
			return h.Err
		}
		if resp.Results[0].Type == jute.OpError {
			return resp.Results[0].Err
		}
		return jute.CodeOk
	}
	for _, r := range []struct {
		what string
		c    *rawClient
		call func(*rawClient, string) jute.Code
		path string
		want jute.Code
	}{
		{"anonymous exists of a covered key", anon, exists, "/zz/secret", jute.CodeNoAuth},
		{"anonymous exists of a missing covered key", anon, exists, "/zz/gone", jute.CodeNoAuth},
		{"anonymous exists of an uncovered key", anon, exists, "/zz/open", jute.CodeOk},
		{"anonymous exists of a znode its ACL closes (ZooKeeper checks none)", anon, exists, "/closed", jute.CodeOk},
		{"anonymous exists of a missing uncovered key", anon, exists, "/zz/nothing", jute.CodeNoNode},
		{"anonymous children naming a covered key", anon, kids, "/zz", jute.CodeNoAuth},
		{"anonymous children2 naming a covered key", anon, kids2, "/zz", jute.CodeNoAuth},
		{"anonymous children in a multi read", anon, multiKids, "/zz", jute.CodeNoAuth},
		{"anonymous count over a covered key", anon, count, "/zz", jute.CodeNoAuth},
		{"anonymous count of the whole tree", anon, count, "/", jute.CodeNoAuth},
		{"anonymous count below the covered key", anon, count, "/zz/open", jute.CodeOk},
		{"alice exists of the covered key", alice, exists, "/zz/secret", jute.CodeOk},
		{"alice exists of the missing covered key", alice, exists, "/zz/gone", jute.CodeNoNode},
		{"alice children naming it", alice, kids, "/zz", jute.CodeOk},
		{"alice children in a multi read", alice, multiKids, "/zz", jute.CodeOk},
		{"alice count over it", alice, count, "/zz", jute.CodeOk},
	} {
		if got := r.call(r.c, r.path); got != r.want {
			t.Errorf("%s (%s): %v, want %v", r.what, r.path, got, r.want)
		}
	}
}
