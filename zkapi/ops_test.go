package zkapi_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/zkapi"
)

var openACL = zk.WorldACL(zk.PermAll)

func TestCreateGetSetDelete(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)

	p, err := c.Create("/a", []byte("one"), 0, openACL)
	if err != nil || p != "/a" {
		t.Fatalf("create /a = %q, %v", p, err)
	}
	data, st, err := c.Get("/a")
	if err != nil || string(data) != "one" {
		t.Fatalf("get /a = %q, %v", data, err)
	}
	if st.Version != 0 || st.Czxid != st.Mzxid || st.Czxid != st.Pzxid || st.DataLength != 3 || st.NumChildren != 0 || st.EphemeralOwner != 0 || st.Ctime == 0 {
		t.Errorf("stat after create: %+v", st)
	}
	st2, err := c.Set("/a", []byte("two!"), 0)
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	if st2.Version != 1 || st2.Mzxid <= st.Mzxid || st2.Czxid != st.Czxid || st2.DataLength != 4 {
		t.Errorf("stat after set: %+v (was %+v)", st2, st)
	}
	if _, err := c.Set("/a", nil, 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Errorf("set with stale version: %v, want bad version", err)
	}
	if _, err := c.Create("/a/b", nil, 0, openACL); err != nil {
		t.Fatalf("create /a/b: %v", err)
	}
	_, st3, _ := c.Get("/a")
	if st3.NumChildren != 1 || st3.Cversion != 1 || st3.Pzxid <= st2.Mzxid {
		t.Errorf("parent stat after child create: %+v", st3)
	}
	if err := c.Delete("/a", -1); !errors.Is(err, zk.ErrNotEmpty) {
		t.Errorf("delete non-empty: %v", err)
	}
	if err := c.Delete("/a/b", 5); !errors.Is(err, zk.ErrBadVersion) {
		t.Errorf("delete bad version: %v", err)
	}
	if err := c.Delete("/a/b", 0); err != nil {
		t.Errorf("delete /a/b: %v", err)
	}
	if ok, _, err := c.Exists("/a/b"); ok || err != nil {
		t.Errorf("exists after delete = %v, %v", ok, err)
	}
	_, st4, _ := c.Get("/a")
	if st4.NumChildren != 0 || st4.Cversion != 2 {
		t.Errorf("parent stat after child delete: %+v", st4)
	}
}

func TestErrorCodes(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)
	if _, err := c.Create("/e", nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/p", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"create exists", func() error { _, err := c.Create("/p", nil, 0, openACL); return err }, zk.ErrNodeExists},
		{"create no parent", func() error { _, err := c.Create("/x/y", nil, 0, openACL); return err }, zk.ErrNoNode},
		{"create under ephemeral", func() error { _, err := c.Create("/e/c", nil, 0, openACL); return err }, zk.ErrNoChildrenForEphemerals},
		{"create empty acl", func() error { _, err := c.Create("/q", nil, 0, nil); return err }, zk.ErrInvalidACL},
		{"create bad world id", func() error {
			_, err := c.Create("/q", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}})
			return err
		}, zk.ErrInvalidACL},
		{"create auth without identity", func() error { _, err := c.Create("/q", nil, 0, zk.AuthACL(zk.PermAll)); return err }, zk.ErrInvalidACL},
		{"create root", func() error { _, err := c.Create("/", nil, 0, openACL); return err }, zk.ErrNodeExists},
		{"get missing", func() error { _, _, err := c.Get("/missing"); return err }, zk.ErrNoNode},
		{"set missing", func() error { _, err := c.Set("/missing", nil, -1); return err }, zk.ErrNoNode},
		{"delete missing", func() error { return c.Delete("/missing", -1) }, zk.ErrNoNode},
		{"delete /zookeeper", func() error { return c.Delete("/zookeeper", -1) }, zk.ErrBadArguments},
		{"delete /zookeeper/quota", func() error { return c.Delete("/zookeeper/quota", -1) }, zk.ErrBadArguments},
		{"children missing", func() error { _, _, err := c.Children("/missing"); return err }, zk.ErrNoNode},
		{"reconfig", func() error { _, err := c.Reconfig([]string{"server.1=x"}, -1); return err }, zk.ErrReconfigDisabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSequentialSuffixCountsEveryCreate(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)
	must := func(p string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	must(c.Create("/q", nil, 0, openACL))
	must(c.Create("/q/plain", nil, 0, openACL))
	first := must(c.Create("/q/s-", nil, zk.FlagSequence, openACL))
	if err := c.Delete(first, -1); err != nil {
		t.Fatal(err)
	}
	second := must(c.Create("/q/s-", nil, zk.FlagSequence|zk.FlagEphemeral, openACL))
	if first != "/q/s-0000000001" || second != "/q/s-0000000002" {
		t.Errorf("sequential names %q, %q; want suffixes 1 and 2", first, second)
	}
	_, st, _ := c.Exists(second)
	if st.EphemeralOwner != c.SessionID() {
		t.Errorf("ephemeralOwner = %x, want session %x", st.EphemeralOwner, c.SessionID())
	}
}

func TestMultiAllOrNothing(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)
	if _, err := c.Create("/m", []byte("x"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	res, err := c.Multi(
		&zk.CreateRequest{Path: "/m/a", Acl: openACL},
		&zk.SetDataRequest{Path: "/m", Data: []byte("y"), Version: 0},
		&zk.CheckVersionRequest{Path: "/m", Version: 1},
		&zk.DeleteRequest{Path: "/m/a", Version: 0},
	)
	if err != nil {
		t.Fatalf("multi: %v", err)
	}
	if len(res) != 4 || res[0].String != "/m/a" || res[1].Stat == nil || res[1].Stat.Version != 1 {
		t.Fatalf("multi results: %+v", res)
	}
	// A failed multi: header ok, 0 before the failed op, its code, then
	// RuntimeInconsistency; nothing applied.
	res, err = c.Multi(
		&zk.CreateRequest{Path: "/m/b", Acl: openACL},
		&zk.SetDataRequest{Path: "/m", Data: []byte("z"), Version: 0},
		&zk.CreateRequest{Path: "/m/c", Acl: openACL},
	)
	if !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("failed multi err = %v", err)
	}
	var codes []error
	for _, r := range res {
		codes = append(codes, r.Error)
	}
	want := []error{nil, zk.ErrBadVersion, zk.ErrAPIError}
	if len(codes) != 3 || codes[0] != nil || !errors.Is(codes[1], zk.ErrBadVersion) {
		t.Errorf("failed multi results %v, want %v", codes, want)
	}
	if ok, _, _ := c.Exists("/m/b"); ok {
		t.Error("failed multi left /m/b behind")
	}
	// A validation failure in a later op still reports an earlier op's
	// own failure first.
	res, err = c.Multi(
		&zk.CreateRequest{Path: "/m", Acl: openACL},
		&zk.CreateRequest{Path: "/m/d", Acl: nil},
	)
	if !errors.Is(err, zk.ErrNodeExists) || len(res) != 2 {
		t.Errorf("multi with exists then invalid ACL: %v %+v", err, res)
	}
}

func TestChildrenSortedAndStat(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)
	for _, p := range []string{"/c", "/c/b", "/c/a", "/c/c"} {
		if _, err := c.Create(p, nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	kids, st, err := c.Children("/c")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kids)
	if !slices.Equal(kids, []string{"a", "b", "c"}) || st.NumChildren != 3 || st.Cversion != 3 {
		t.Errorf("children %v stat %+v", kids, st)
	}
	root, _, err := c.Children("/")
	if err != nil || !slices.Contains(root, "zookeeper") || !slices.Contains(root, "c") {
		t.Errorf("root children %v, %v", root, err)
	}
	sys, _, err := c.Children("/zookeeper")
	slices.Sort(sys)
	if err != nil || !slices.Equal(sys, []string{"config", "quota"}) {
		t.Errorf("/zookeeper children %v, %v", sys, err)
	}
}
