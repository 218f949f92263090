package zkapi

import (
	"slices"
	"strings"
	"testing"
	"time"

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

func TestJavaDouble(t *testing.T) {
	// Double.toString, for the averages mntr and srvr print.
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0.0"},
		{3, "3.0"},
		{22.5, "22.5"},
		{0.4286, "0.4286"},
		{0.001, "0.001"},
		{0.0005, "5.0E-4"},
		{1.2345e7, "1.2345E7"},
		{1e7, "1.0E7"},
		{9999999, "9999999.0"},
	} {
		if got := javaDouble(tc.v); got != tc.want {
			t.Errorf("javaDouble(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestLatencySnapshot(t *testing.T) {
	var l latency
	if s := l.snapshot(); s.count != 0 || s.min != 0 || s.max != 0 || s.avg != 0 {
		t.Fatalf("empty: %+v", s)
	}
	now := time.Now()
	for _, d := range []time.Duration{3 * time.Millisecond, 47 * time.Millisecond, 500 * time.Microsecond, 20 * time.Millisecond} {
		l.add(d, now)
	}
	s := l.snapshot()
	// Total 70.5 ms over 4: 17.625 ms; whole-millisecond min and max.
	if s.count != 4 || s.min != 0 || s.max != 47 || s.avg != 17.625 || s.avgTruncated != 17 || s.last != 20 {
		t.Errorf("snapshot %+v", s)
	}
}
