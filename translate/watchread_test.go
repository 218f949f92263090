package translate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/januskv/janus/internal/janustest"
)

// TestWatchingReadSeesAcknowledgedEtcdWrite: a ZooKeeper read that sets a
// watch reads at the revision the watch dispatcher has reached, which can
// lag the store; it must still show a write that an etcd client on the
// same server was answered for before the read was sent, as ZooKeeper
// shows another session's acknowledged write to every later read on the
// same server. Each round writes with clientv3 and reads at once with each
// watch-setting ZooKeeper read.
func TestWatchingReadSeesAcknowledgedEtcdWrite(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)
	const rounds = 300
	for i := range rounds {
		parent := fmt.Sprintf("/rw/%d", i)
		key := parent + "/k"
		if _, err := cli.Put(ctx, key, "v"); err != nil {
			t.Fatal(err)
		}
		if ok, _, _, err := conn.ExistsW(key); err != nil || !ok {
			t.Fatalf("round %d: exists with a watch after the etcd put: %v, %v", i, ok, err)
		}
		if _, err := cli.Put(ctx, key, "w"); err != nil {
			t.Fatal(err)
		}
		if data, _, _, err := conn.GetW(key); err != nil || string(data) != "w" {
			t.Fatalf("round %d: get with a watch after the etcd put: %q, %v", i, data, err)
		}
		if _, err := cli.Put(ctx, parent+"/k2", "v"); err != nil {
			t.Fatal(err)
		}
		if kids, _, _, err := conn.ChildrenW(parent); err != nil || len(kids) != 2 {
			t.Fatalf("round %d: children with a watch after the etcd put: %v, %v", i, kids, err)
		}
	}
}
