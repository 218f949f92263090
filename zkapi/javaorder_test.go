package zkapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

func TestJavaStringHash(t *testing.T) {
	// Values of java.lang.String.hashCode.
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"ip", 3367},
		{"hello", 99162322},
		{"digest", -1331913276},
		{"anyone", -1412637446},
		{"\U0001F600", 1772899}, // a surrogate pair: two UTF-16 units
	} {
		if got := javaStringHash(tc.s); got != tc.want {
			t.Errorf("javaStringHash(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestJavaSetOrder(t *testing.T) {
	ip := core.ID{Scheme: "ip", ID: "127.0.0.1"}
	bob := core.ID{Scheme: "digest", ID: "bob:" + mustDigestID(t, "bob:pw")}
	alice := core.ID{Scheme: "digest", ID: "alice:" + mustDigestID(t, "alice:pw")}
	for _, tc := range []struct {
		in, want []core.ID
	}{
		// Seen from ZooKeeper 3.8's whoAmI in the differential test.
		{[]core.ID{ip, bob}, []core.ID{bob, ip}},
		{[]core.ID{bob, ip}, []core.ID{bob, ip}},
		{[]core.ID{ip}, []core.ID{ip}},
		{nil, []core.ID{}},
	} {
		got := javaSetOrder(tc.in)
		if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("javaSetOrder(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	// The order depends only on the set, not on how it was built.
	a, b := javaSetOrder([]core.ID{alice, ip, bob}), javaSetOrder([]core.ID{bob, alice, ip})
	if !slices.Equal(a, b) {
		t.Errorf("order depends on insertion: %v vs %v", a, b)
	}
}

func mustDigestID(t *testing.T, userPassword string) string {
	t.Helper()
	d, ok := digestID(userPassword)
	if !ok {
		t.Fatalf("digestID(%q) failed", userPassword)
	}
	_, hash, _ := strings.Cut(d, ":")
	return hash
}

func TestMultiCreateOp(t *testing.T) {
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
	for _, tc := range []struct {
		name string
		in   jute.MultiOp
		want jute.OpCode
		ttl  bool // the result is still a CreateTTLRequest
	}{
		{"create2 becomes create", jute.MultiOp{Type: jute.OpCreate2, Request: &jute.CreateRequest{Path: "/a", ACL: acl}}, jute.OpCreate, false},
		{"create with container flags", jute.MultiOp{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/a", ACL: acl, Flags: jute.ModeContainer}}, jute.OpCreateContainer, false},
		{"createContainer without container flags", jute.MultiOp{Type: jute.OpCreateContainer, Request: &jute.CreateRequest{Path: "/a", ACL: acl}}, jute.OpCreate, false},
		{"createTTL", jute.MultiOp{Type: jute.OpCreateTTL, Request: &jute.CreateTTLRequest{Path: "/a", ACL: acl, Flags: jute.ModePersistentWithTTL, TTL: 5}}, jute.OpCreateTTL, true},
		{"createTTL without TTL flags drops the TTL", jute.MultiOp{Type: jute.OpCreateTTL, Request: &jute.CreateTTLRequest{Path: "/a", ACL: acl, Flags: jute.ModeEphemeral, TTL: 5}}, jute.OpCreate, false},
		{"delete unchanged", jute.MultiOp{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: "/a", Version: -1}}, jute.OpDelete, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, rec := multiCreateOp(tc.in)
			if typ != tc.want {
				t.Errorf("type %v, want %v", typ, tc.want)
			}
			if _, isTTL := rec.(*jute.CreateTTLRequest); isTTL != tc.ttl {
				t.Errorf("record %T", rec)
			}
		})
	}
}
