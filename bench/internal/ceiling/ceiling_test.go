package ceiling

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The ceilings must speak each wire well enough that the real client
// libraries the benchmark uses get OK answers; otherwise the ceiling would
// measure errors.
func TestCeilingsAnswerRealClients(t *testing.T) {
	const valueSize = 256
	s, err := Start(Config{EtcdListen: "127.0.0.1:0", ZKListen: "127.0.0.1:0", ValueSize: valueSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("etcd", func(t *testing.T) {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.EtcdAddr}, DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Put(ctx, "/k", "v"); err != nil {
			t.Fatalf("put: %v", err)
		}
		for _, opts := range [][]clientv3.OpOption{nil, {clientv3.WithSerializable()}} {
			r, err := c.Get(ctx, "/k", opts...)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if len(r.Kvs) != 1 || len(r.Kvs[0].Value) != valueSize || string(r.Kvs[0].Key) != "/k" {
				t.Fatalf("get: %v, want /k with a %d-byte value", r.Kvs, valueSize)
			}
		}
		tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Version("/k"), "=", 0)).Then(clientv3.OpPut("/k", "v")).Commit()
		if err != nil || !tr.Succeeded || len(tr.Responses) != 1 {
			t.Fatalf("txn: %v, %v", tr, err)
		}
	})

	t.Run("zookeeper", func(t *testing.T) {
		c, events, err := zk.Connect([]string{s.ZKAddr}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for ev := range events {
			if ev.State == zk.StateHasSession {
				break
			}
		}
		go func() {
			for range events {
			}
		}()
		p, err := c.Create("/a", []byte("x"), 0, zk.WorldACL(zk.PermAll))
		if err != nil || p != "/a" {
			t.Fatalf("create: %q, %v", p, err)
		}
		if _, err := c.Set("/a", []byte("y"), -1); err != nil {
			t.Fatalf("setData: %v", err)
		}
		data, st, err := c.Get("/a")
		if err != nil || len(data) != valueSize || st.DataLength != valueSize {
			t.Fatalf("getData: %d bytes, %+v, %v; want %d bytes", len(data), st, err, valueSize)
		}
		ok, _, err := c.Exists("/a")
		if err != nil || !ok {
			t.Fatalf("exists: %v, %v", ok, err)
		}
	})
}
