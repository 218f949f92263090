package etcdapi_test

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func grantWithID(ctx context.Context, j *janus, id, ttl int64) (*pb.LeaseGrantResponse, error) {
	return pb.NewLeaseClient(j.Client.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl})
}

func TestLeaseGrantAndErrors(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	const id = 0x1234
	resp, err := grantWithID(ctx, j, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != id || resp.TTL != 2 {
		t.Fatalf("grant = id %x ttl %d, want id %x and the TTL raised to the 2s minimum", resp.ID, resp.TTL, id)
	}
	if _, err := grantWithID(ctx, j, id, 30); err == nil || rpctypes.Error(err).Error() != rpctypes.ErrLeaseExist.Error() {
		t.Fatalf("second grant of one ID: %v, want %v", err, rpctypes.ErrLeaseExist)
	}
	ttl, err := j.Client.TimeToLive(ctx, 0x999)
	if err != nil || ttl.TTL != -1 {
		t.Fatalf("TimeToLive(unknown) = %+v, %v; want TTL -1 and no error", ttl, err)
	}
	// The keepalive stream answers an unknown lease with TTL 0.
	ka, err := pb.NewLeaseClient(j.Client.ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&pb.LeaseKeepAliveRequest{ID: 0x999}); err != nil {
		t.Fatal(err)
	}
	kr, err := ka.Recv()
	if err != nil || kr.TTL != 0 || kr.ID != 0x999 {
		t.Fatalf("keepalive(unknown) = %+v, %v; want TTL 0", kr, err)
	}
}

// TestLeaseRevokeDeletesKeysInOneRevision also checks TimeToLive's keys
// and that the revoke's DELETE events arrive together.
func TestLeaseRevokeDeletesKeysInOneRevision(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	c := j.Client
	g, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"l/a", "l/b", "l/c"} {
		if _, err := c.Put(ctx, k, "v", clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
	}
	ttl, err := c.TimeToLive(ctx, g.ID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != 60 || ttl.TTL <= 0 || ttl.TTL > 60 || len(ttl.Keys) != 3 {
		t.Fatalf("TimeToLive = %+v", ttl)
	}
	leases, err := c.Leases(ctx)
	if err != nil || len(leases.Leases) != 1 || leases.Leases[0].ID != g.ID {
		t.Fatalf("Leases = %+v, %v", leases, err)
	}
	w := c.Watch(ctx, "l/", clientv3.WithPrefix())
	rev, err := c.Revoke(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	wr := <-w
	if len(wr.Events) != 3 {
		t.Fatalf("revoke produced %d events in its first response, want 3", len(wr.Events))
	}
	for _, ev := range wr.Events {
		if ev.Type != mvccpb.DELETE || ev.Kv.ModRevision != rev.Header.Revision {
			t.Fatalf("event %v, want DELETE at revision %d", ev, rev.Header.Revision)
		}
	}
	// Revoking a lease with no keys creates no revision.
	g2, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := c.Revoke(ctx, g2.ID)
	if err != nil || rev2.Header.Revision != rev.Header.Revision {
		t.Fatalf("empty revoke: %v, revision %d, want %d", err, rev2.Header.Revision, rev.Header.Revision)
	}
}

// TestLeaseExpiryDeletesKeys waits (generously: the machine is shared) for
// an unrenewed lease to expire, as Kubernetes' events do.
func TestLeaseExpiryDeletesKeys(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	c := j.Client
	g, err := c.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(ctx, "e", clientv3.WithPrefix())
	if _, err := c.Put(ctx, "e1", "v", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case wr := <-w:
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE && string(ev.Kv.Key) == "e1" {
					ttl, err := c.TimeToLive(ctx, g.ID)
					if err != nil || ttl.TTL != -1 {
						t.Fatalf("TimeToLive after expiry = %+v, %v", ttl, err)
					}
					return
				}
			}
		case <-deadline:
			t.Fatal("lease did not expire within 30s")
		}
	}
}

// TestKeepAliveKeepsLease renews a short lease across several TTLs.
func TestKeepAliveKeepsLease(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	c := j.Client
	g, err := c.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "kept", "v", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	ka, err := c.KeepAlive(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	stop := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case r, ok := <-ka:
			if !ok {
				t.Fatal("keepalive channel closed: lease lost")
			}
			if r.TTL != 2 {
				t.Fatalf("keepalive TTL %d, want 2", r.TTL)
			}
		case <-stop:
			done = true
		}
	}
	resp, err := c.Get(ctx, "kept")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key of a kept-alive lease: %+v, %v", resp, err)
	}
}
