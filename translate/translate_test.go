package translate

import (
	"slices"
	"sort"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/januskv/janus/core"
)

func TestIsZNodeAndKeyToPath(t *testing.T) {
	cases := []struct {
		key  string
		want bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b/c", true},
		{"/zookeeper/quota", true},
		{"/a.b/c-d_e", true},
		{"/é/日本", true},
		{"", false},
		{"a", false},
		{"a/b", false},
		{"/a/", false},
		{"//a", false},
		{"/a//b", false},
		{"/a/./b", false},
		{"/a/..", false},
		{"/a\x00b", false},
		{"/a\x1fb", false},
		{"/a\x7fb", false},
		{"/\xff", false},
		{"/\U0001F600", false}, // a surrogate pair to ZooKeeper's UTF-16 check
		{"registry/pods/x", false},
	}
	for _, c := range cases {
		if got := IsZNode([]byte(c.key)); got != c.want {
			t.Errorf("IsZNode(%q) = %v, want %v", c.key, got, c.want)
		}
		path, ok := KeyToPath([]byte(c.key))
		if ok != c.want || (ok && path != c.key) {
			t.Errorf("KeyToPath(%q) = %q, %v", c.key, path, ok)
		}
		if ok && string(PathToKey(path)) != c.key {
			t.Errorf("PathToKey(KeyToPath(%q)) = %q", c.key, PathToKey(path))
		}
	}
}

func TestIsReserved(t *testing.T) {
	cases := map[string]bool{
		"/zookeeper": true, "/zookeeper/quota": true, "/zookeeper/config": true,
		"/zookeeperx": false, "/zoo": false, "/": false, "/a/zookeeper": false, "zookeeper": false,
	}
	for p, want := range cases {
		if got := IsReserved([]byte(p)); got != want {
			t.Errorf("IsReserved(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestImplicitParents(t *testing.T) {
	cases := []struct {
		path string
		want []string
	}{
		{"/", nil},
		{"/a", nil},
		{"/a/b", []string{"/a"}},
		{"/a/b/c", []string{"/a/b", "/a"}},
	}
	for _, c := range cases {
		var got []string
		for _, p := range ImplicitParents([]byte(c.path)) {
			got = append(got, string(p))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ImplicitParents(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

func TestVersions(t *testing.T) {
	cases := []struct {
		etcd int64
		zk   int32
	}{{1, 0}, {2, 1}, {10, 9}}
	for _, c := range cases {
		if got := ZKVersion(c.etcd); got != c.zk {
			t.Errorf("ZKVersion(%d) = %d, want %d", c.etcd, got, c.zk)
		}
		if got, ok := EtcdVersion(c.zk); !ok || got != c.etcd {
			t.Errorf("EtcdVersion(%d) = %d, %v, want %d", c.zk, got, ok, c.etcd)
		}
	}
	if got := ZKVersion(0); got != 0 {
		t.Errorf("an absent key (implicit parent) has ZooKeeper version %d, want 0", got)
	}
	if _, ok := EtcdVersion(-1); ok {
		t.Error("the ZooKeeper wildcard version -1 has an etcd version")
	}
}

func TestStatAndKeyValueAgree(t *testing.T) {
	cases := []struct {
		name string
		kv   *mvccpb.KeyValue
		dir  *core.Dir
		want core.Stat
	}{
		{
			name: "fresh persistent",
			kv:   &mvccpb.KeyValue{Key: []byte("/a"), Value: []byte("xyz"), CreateRevision: 5, ModRevision: 5, Version: 1},
			want: core.Stat{Czxid: 5, Mzxid: 5, Version: 0, DataLength: 3, Pzxid: 5},
		},
		{
			name: "modified ephemeral",
			kv:   &mvccpb.KeyValue{Key: []byte("/e"), Value: nil, CreateRevision: 7, ModRevision: 9, Version: 3, Lease: 0x1234},
			want: core.Stat{Czxid: 7, Mzxid: 9, Version: 2, EphemeralOwner: 0x1234, Pzxid: 7},
		},
		{
			name: "with children",
			kv:   &mvccpb.KeyValue{Key: []byte("/p"), Value: []byte("v"), CreateRevision: 2, ModRevision: 3, Version: 2},
			dir:  &core.Dir{NumChildren: 2, Cversion: 3, Pzxid: 11, Seq: 3},
			want: core.Stat{Czxid: 2, Mzxid: 3, Version: 1, DataLength: 1, NumChildren: 2, Cversion: 3, Pzxid: 11},
		},
	}
	for _, c := range cases {
		got := StatOfKeyValue(c.kv, c.dir)
		if got != c.want {
			t.Errorf("%s: StatOfKeyValue = %+v, want %+v", c.name, got, c.want)
		}
		back, ok := KeyValueOfStat(string(c.kv.Key), c.kv.Value, got, false)
		if !ok || back.String() != c.kv.String() {
			t.Errorf("%s: KeyValueOfStat(StatOfKeyValue(kv)) = %v, want %v", c.name, back, c.kv)
		}
	}
	if _, ok := KeyValueOfStat("/implicit", nil, core.Stat{Czxid: 4, Mzxid: 4, NumChildren: 1}, true); ok {
		t.Error("an implicit parent has an etcd KeyValue")
	}
}

func TestSessionsAreLeases(t *testing.T) {
	for _, id := range []int64{1, 0x7fff_ffff_ffff_ffff, 0x0123_4567_89ab_cdef} {
		if LeaseOfSession(id) != id || SessionOfLease(id) != id {
			t.Errorf("session 0x%x and its lease have different IDs", id)
		}
	}
	cases := map[int32]int64{1: 1, 999: 1, 1000: 1, 1001: 2, 4000: 4, 30000: 30}
	for ms, want := range cases {
		if got := LeaseTTL(ms); got != want {
			t.Errorf("LeaseTTL(%dms) = %ds, want %ds", ms, got, want)
		}
	}
}

func TestSequentialNames(t *testing.T) {
	cases := []struct {
		prefix string
		seq    int32
		name   string
	}{
		{"lock-", 0, "lock-0000000000"},
		{"lock-", 7, "lock-0000000007"},
		{"", 42, "0000000042"},
		{"x", 2147483647, "x2147483647"},
		// A counter past 2^31-1 wraps; Java's String.format("%010d")
		// pads after the sign (checked against a JVM).
		{"x", -5, "x-000000005"},
		{"x", -2147483648, "x-2147483648"},
	}
	for _, c := range cases {
		if got := SequentialName(c.prefix, c.seq); got != c.name {
			t.Errorf("SequentialName(%q, %d) = %q, want %q", c.prefix, c.seq, got, c.name)
		}
		if c.seq < 0 {
			continue // ParseSequential takes only the names of an unwrapped counter
		}
		p, s, ok := ParseSequential(c.name)
		if !ok || p != c.prefix || s != c.seq {
			t.Errorf("ParseSequential(%q) = %q, %d, %v", c.name, p, s, ok)
		}
	}
	for _, bad := range []string{"", "lock-", "lock-12345", "lock-00000000x1", "n-+000000001", "n-9999999999"} {
		if _, _, ok := ParseSequential(bad); ok {
			t.Errorf("ParseSequential(%q) accepted a name without a sequential suffix", bad)
		}
	}
	// Sorting by suffix orders siblings whatever their prefixes, which is
	// what a lock recipe relies on and what create_revision order gives.
	names := []string{"write-0000000003", "read-0000000001", "read-0000000010", "write-0000000002"}
	sort.Slice(names, func(i, j int) bool {
		_, a, _ := ParseSequential(names[i])
		_, b, _ := ParseSequential(names[j])
		return a < b
	})
	want := []string{"read-0000000001", "write-0000000002", "write-0000000003", "read-0000000010"}
	if !slices.Equal(names, want) {
		t.Errorf("sorted by suffix: %q, want %q", names, want)
	}
}

func TestFencingToken(t *testing.T) {
	kv := &mvccpb.KeyValue{Key: []byte("/lock/x"), CreateRevision: 17, ModRevision: 30, Version: 4}
	if FencingToken(kv) != 17 {
		t.Errorf("fencing token %d, want the create revision 17", FencingToken(kv))
	}
	if got := FencingTokenOfStat(StatOfKeyValue(kv, nil)); got != FencingToken(kv) {
		t.Errorf("ZooKeeper and etcd holders of one lock node see tokens %d and %d", got, FencingToken(kv))
	}
}
