package migrate

import (
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestParseEndpoint(t *testing.T) {
	cases := []struct {
		in      string
		want    Endpoint
		wantErr string
	}{
		{in: "zk://127.0.0.1:2181", want: Endpoint{Scheme: "zk", Hosts: []string{"127.0.0.1:2181"}}},
		{in: "zk://a:1,b:2,c:3/app/x", want: Endpoint{Scheme: "zk", Hosts: []string{"a:1", "b:2", "c:3"}, Path: "/app/x"}},
		{in: "zk://a:1/", want: Endpoint{Scheme: "zk", Hosts: []string{"a:1"}}},
		{in: "etcd://h:2379/registry/", want: Endpoint{Scheme: "etcd", Hosts: []string{"h:2379"}, Path: "/registry/"}},
		{in: "http://h:1", wantErr: "unknown scheme"},
		{in: "h:1", wantErr: "want zk://"},
		{in: "zk://", wantErr: "no host"},
		{in: "zk://host", wantErr: "no port"},
		{in: "zk://h:1/app/", wantErr: "must not end in /"},
	}
	for _, c := range cases {
		got, err := ParseEndpoint(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseEndpoint(%q) = %v, %v; want error %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.Scheme != c.want.Scheme || got.Path != c.want.Path || !slices.Equal(got.Hosts, c.want.Hosts) {
			t.Errorf("ParseEndpoint(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	zkE := Endpoint{Scheme: "zk", Hosts: []string{"a:1"}}
	etcdE := Endpoint{Scheme: "etcd", Hosts: []string{"b:2"}}
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{From: zkE, To: etcdE}, ""},
		{Config{From: zkE, To: zkE}, ""},
		{Config{From: etcdE, To: etcdE, Follow: true}, ""},
		{Config{From: etcdE, To: zkE}, "needs an etcd target"},
		{Config{From: zkE, To: etcdE, Follow: true}, ""},
		{Config{From: zkE, To: Endpoint{Scheme: "zk", Hosts: []string{"a:1"}, Path: "/x"}}, "must not name a path"},
	}
	for _, c := range cases {
		err := c.cfg.check()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("check(%v -> %v follow=%v) = %v, want %q", c.cfg.From, c.cfg.To, c.cfg.Follow, err, c.want)
		}
	}
}

func TestFollowOps(t *testing.T) {
	ev := func(typ mvccpb.Event_EventType, key, val string, lease int64) *clientv3.Event {
		return &clientv3.Event{Type: typ, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), Lease: lease}}
	}
	ops := followOps([]*clientv3.Event{
		ev(mvccpb.PUT, "/a", "1", 0),
		ev(mvccpb.PUT, "/b", "x", 0),
		ev(mvccpb.PUT, "/a", "2", 0), // only the last write of /a goes
		ev(mvccpb.DELETE, "/c", "", 0),
		ev(mvccpb.PUT, "/d", "leased", 7), // a key gaining a lease leaves the copy
		ev(mvccpb.PUT, "/zookeeper/x", "mine", 0),
	})
	var got []string
	for _, op := range ops {
		switch {
		case op.IsPut():
			got = append(got, "put "+string(op.KeyBytes())+"="+string(op.ValueBytes()))
		case op.IsDelete():
			got = append(got, "delete "+string(op.KeyBytes()))
		}
	}
	want := []string{"put /b=x", "put /a=2", "delete /c", "delete /d"}
	if !slices.Equal(got, want) {
		t.Errorf("followOps = %q, want %q", got, want)
	}
}
