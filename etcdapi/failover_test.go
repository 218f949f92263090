package etcdapi_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
)

// leaderless stands between the etcd face and a member and makes lease
// renewals fail as they do on a member whose ensemble is electing.
type leaderless struct {
	core.Backend
	down atomic.Bool
}

func (b *leaderless) Leases() core.Lessor { return leaderlessLeases{b.Backend.Leases(), b} }

type leaderlessLeases struct {
	core.Lessor
	b *leaderless
}

func (l leaderlessLeases) KeepAlive(ctx context.Context, id int64) (int64, error) {
	if l.b.down.Load() {
		return 0, fmt.Errorf("lease call to the leader: %w", core.ErrNoLeader)
	}
	return l.Lessor.KeepAlive(ctx, id)
}

// TestKeepAliveWithoutALeaderIsRetriable: while no leader can renew a
// lease, LeaseKeepAlive ends the stream with etcd's "no leader" error,
// which clientv3 retries on a new stream, and never answers TTL 0, which
// clientv3 takes as the lease's expiry. Once a leader is back the same
// lease renews.
func TestKeepAliveWithoutALeaderIsRetriable(t *testing.T) {
	logger := testlog.New(t)
	m, err := server.OpenMember(server.MemberConfig{DataDir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b := &leaderless{Backend: m}
	srv := etcdapi.New(b, etcdapi.Config{Logger: logger})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	c := newClient(t, "http://"+l.Addr().String())
	ctx := testCtx(t)
	g, err := c.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	lc := pb.NewLeaseClient(c.ActiveConnection())
	keepAlive := func() (*pb.LeaseKeepAliveResponse, error) {
		s, err := lc.LeaseKeepAlive(ctx)
		if err != nil {
			return nil, err
		}
		defer s.CloseSend()
		if err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(g.ID)}); err != nil {
			return nil, err
		}
		return s.Recv()
	}

	b.down.Store(true)
	resp, err := keepAlive()
	if err == nil {
		t.Fatalf("keep-alive without a leader answered %+v, want the stream to end with %v", resp, rpctypes.ErrGRPCNoLeader)
	}
	if got, want := status.Convert(err).Message(), status.Convert(rpctypes.ErrGRPCNoLeader).Message(); got != want {
		t.Fatalf("keep-alive without a leader: %v, want %v", err, rpctypes.ErrGRPCNoLeader)
	}

	b.down.Store(false)
	resp, err = keepAlive()
	if err != nil || resp.TTL != 10 {
		t.Fatalf("keep-alive once a leader is back: %+v, %v", resp, err)
	}
	ttl, err := c.TimeToLive(ctx, g.ID)
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("the lease after the outage: %+v, %v", ttl, err)
	}
}
