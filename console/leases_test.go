package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
)

// TestAPILeaseClient grants one lease over gRPC and one through the JSON
// gateway and checks the sessions list names each granting client.
func TestAPILeaseClient(t *testing.T) {
	j := start(t, 1)
	grpcLease, err := j.etcd.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(j.base+"/v3/lease/grant", "application/json", strings.NewReader(`{"TTL":60}`))
	if err != nil {
		t.Fatal(err)
	}
	var granted struct {
		ID int64 `json:"ID,string"`
	}
	err = json.NewDecoder(resp.Body).Decode(&granted)
	resp.Body.Close()
	if err != nil || granted.ID == 0 {
		t.Fatalf("gateway grant: %v (status %d)", err, resp.StatusCode)
	}
	var sessions struct {
		Sessions []struct {
			ID     int64  `json:"id,string"`
			Face   string `json:"face"`
			Client string `json:"client"`
		}
	}
	j.get(t, "", "sessions", nil, &sessions)
	clients := map[int64]string{}
	for _, s := range sessions.Sessions {
		clients[s.ID] = s.Client
	}
	if got := clients[int64(grpcLease.ID)]; !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("the gRPC client's lease shows client %q, want its 127.0.0.1 address and port", got)
	}
	if got := clients[granted.ID]; got != "127.0.0.1 (JSON gateway)" {
		t.Errorf("the gateway client's lease shows client %q, want \"127.0.0.1 (JSON gateway)\"", got)
	}
}

// TestAPILocksElectionAndV3Lock campaigns with etcd's concurrency
// Election and takes a lock through the v3lock service, and checks the
// locks API names each holder with its fencing token (and the leader's
// proposal as its value).
func TestAPILocksElectionAndV3Lock(t *testing.T) {
	j := start(t, 1)
	ctx := t.Context()
	s, err := concurrency.NewSession(j.etcd, concurrency.WithTTL(60))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := concurrency.NewElection(s, "/elect/svc")
	if err := e.Campaign(ctx, "leader-1"); err != nil {
		t.Fatal(err)
	}
	lease, err := j.etcd.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	locked, err := v3lockpb.NewLockClient(j.etcd.ActiveConnection()).Lock(ctx, &v3lockpb.LockRequest{Name: []byte("/v3lock/res"), Lease: int64(lease.ID)})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Locks []struct {
			Prefix, Recipe string
			Holder         struct {
				Key, Value string
				Token      int64
			}
		}
	}
	j.get(t, "", "locks", url.Values{"prefix": {"/"}}, &out)
	got := map[string]string{}
	for _, l := range out.Locks {
		got[l.Prefix] = fmt.Sprintf("%s %s %d %s", l.Recipe, l.Holder.Key, l.Holder.Token, unb64(l.Holder.Value))
	}
	leader, err := j.etcd.Get(ctx, e.Key())
	if err != nil || len(leader.Kvs) != 1 {
		t.Fatalf("leader key: %v %v", leader, err)
	}
	held, err := j.etcd.Get(ctx, string(locked.Key))
	if err != nil || len(held.Kvs) != 1 {
		t.Fatalf("v3lock key: %v %v", held, err)
	}
	const recipe = "etcd concurrency Mutex/Election (v3lock, v3election)"
	for prefix, want := range map[string]string{
		"/elect/svc":  fmt.Sprintf("%s %s %d leader-1", recipe, e.Key(), leader.Kvs[0].CreateRevision),
		"/v3lock/res": fmt.Sprintf("%s %s %d ", recipe, locked.Key, held.Kvs[0].CreateRevision),
	} {
		if got[prefix] != want {
			t.Errorf("%s: %q, want %q", prefix, got[prefix], want)
		}
	}
}
