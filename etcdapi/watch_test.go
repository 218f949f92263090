package etcdapi_test

import (
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/server"
)

func TestWatchReplayFiltersAndCancel(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	c := j.Client
	first, err := c.Put(ctx, "w/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "w/b", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "w/a"); err != nil {
		t.Fatal(err)
	}
	// ZooKeeper-style paths make implicit parents that etcd must not see.
	if _, err := c.Put(ctx, "/zk/a/b", "z"); err != nil {
		t.Fatal(err)
	}

	replay := c.Watch(ctx, "w/", clientv3.WithPrefix(), clientv3.WithRev(first.Header.Revision), clientv3.WithPrevKV())
	wantReplay := []string{"PUT w/a 1", "PUT w/b 2", "DELETE w/a prev=1"}
	got := collect(t, replay, len(wantReplay))
	if strings.Join(got, "|") != strings.Join(wantReplay, "|") {
		t.Fatalf("replay = %q, want %q", got, wantReplay)
	}

	noPut := c.Watch(ctx, "w/", clientv3.WithPrefix(), clientv3.WithFilterPut())
	all := c.Watch(ctx, "", clientv3.WithFromKey())
	if _, err := c.Put(ctx, "w/c", "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "w/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/zk/a/c", "z"); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, noPut, 1); got[0] != "DELETE w/c" {
		t.Fatalf("NOPUT watcher got %q", got)
	}
	if got, want := collect(t, all, 3), "PUT w/c 3|DELETE w/c|PUT /zk/a/c z"; strings.Join(got, "|") != want {
		t.Fatalf("from-key watcher got %q, want %q (no implicit parents)", got, want)
	}
}

func collect(t *testing.T, w clientv3.WatchChan, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		wr, ok := <-w
		if !ok || wr.Err() != nil {
			t.Fatalf("watch ended after %q: %v", out, wr.Err())
		}
		for _, ev := range wr.Events {
			s := fmt.Sprintf("%s %s", ev.Type, ev.Kv.Key)
			if ev.Type == mvccpb.PUT {
				s += " " + string(ev.Kv.Value)
			}
			if ev.PrevKv != nil {
				s += " prev=" + string(ev.PrevKv.Value)
			}
			out = append(out, s)
		}
	}
	return out
}

// TestWatchCompactedStart checks the answer to a watch from a compacted
// revision: compact_revision set and the watch canceled, not an RPC error.
func TestWatchCompactedStart(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	c := j.Client
	for i := range 5 {
		if _, err := c.Put(ctx, "k", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Compact(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wr := <-c.Watch(ctx, "k", clientv3.WithRev(2))
	if wr.CompactRevision != 4 || !wr.Canceled {
		t.Fatalf("watch from compacted revision: %+v", wr)
	}
}

// TestWatchProgress checks RequestProgress (watch ID -1, current revision)
// and periodic progress notifications.
func TestWatchProgress(t *testing.T) {
	j := startJanus(t, func(_ *server.MemberConfig, c *etcdapi.Config) { c.ProgressNotifyInterval = 200e6 })
	ctx := testCtx(t)
	c := j.Client
	resp, err := c.Put(ctx, "p", "1")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := pb.NewWatchClient(c.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte("p"), ProgressNotify: true, WatchId: 7,
	}}}
	if err := ws.Send(create); err != nil {
		t.Fatal(err)
	}
	created, err := ws.Recv()
	if err != nil || !created.Created || created.WatchId != 7 {
		t.Fatalf("create: %+v, %v", created, err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
		t.Fatal(err)
	}
	var sawRequested, sawPeriodic bool
	for !sawRequested || !sawPeriodic {
		wr, err := ws.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(wr.Events) != 0 || wr.Created || wr.Canceled || wr.Header.Revision != resp.Header.Revision {
			t.Fatalf("not a progress notification at revision %d: %+v", resp.Header.Revision, wr)
		}
		switch wr.WatchId {
		case -1:
			sawRequested = true
		case 7:
			sawPeriodic = true
		default:
			t.Fatalf("progress notification for watch %d", wr.WatchId)
		}
	}
	// A duplicate client-chosen ID is refused.
	if err := ws.Send(create); err != nil {
		t.Fatal(err)
	}
	for {
		wr, err := ws.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if wr.Created {
			if !wr.Canceled || wr.WatchId != -1 || wr.CancelReason == "" {
				t.Fatalf("duplicate watch ID: %+v", wr)
			}
			break
		}
	}
}

// TestWatchFragment splits a large revision into fragments the client
// joins back.
func TestWatchFragment(t *testing.T) {
	j := startJanus(t, func(_ *server.MemberConfig, c *etcdapi.Config) { c.MaxRequestBytes = 4096 })
	ctx := testCtx(t)
	c := j.Client
	// One small request, one large revision: a range delete whose
	// events carry the deleted values.
	for i := range 10 {
		if _, err := c.Put(ctx, fmt.Sprintf("f/%d", i), strings.Repeat("x", 1000)); err != nil {
			t.Fatal(err)
		}
	}
	w := c.Watch(ctx, "f/", clientv3.WithPrefix(), clientv3.WithFragment(), clientv3.WithPrevKV())
	if _, err := c.Delete(ctx, "f/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	wr := <-w
	if len(wr.Events) != 10 {
		t.Fatalf("got %d events in the joined response, want 10", len(wr.Events))
	}
}
