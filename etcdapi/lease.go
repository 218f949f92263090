package etcdapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"

	"github.com/januskv/janus/core"
)

// maxLeaseTTL is etcd's upper bound on a granted TTL, in seconds.
const maxLeaseTTL = 9_000_000_000

type leaseServer struct {
	pb.UnimplementedLeaseServer
	s *Server
}

func (l *leaseServer) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if r.TTL > maxLeaseTTL {
		return nil, rpctypes.ErrGRPCLeaseTTLTooLarge
	}
	lessor := l.s.b.Leases()
	id := r.ID
	if id == 0 {
		id = lessor.NewID()
	}
	ttl := max(r.TTL, lessor.MinTTL())
	res, err := l.s.propose(ctx, &core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: ttl}})
	if err != nil {
		return nil, err
	}
	l.s.leaseClients.add(id, grantAddr(ctx), l.s.leasesExisting)
	return &pb.LeaseGrantResponse{Header: l.s.header(res.Rev), ID: id, TTL: ttl}, nil
}

func (l *leaseServer) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	c, err := l.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.mayEnd(ctx, c, r.ID); err != nil {
		return nil, err
	}
	res, err := l.s.propose(ctx, &core.Op{LeaseRevoke: &core.LeaseRevoke{ID: r.ID}, AuthCheck: c.check()})
	if err != nil {
		return nil, err
	}
	l.s.leaseClients.forget(r.ID)
	return &pb.LeaseRevokeResponse{Header: l.s.header(res.Rev)}, nil
}

// mayEnd checks that the caller may end (or keep alive) lease id: as in
// etcd, it must be able to write every key attached to it. A lease that is
// a ZooKeeper session is closed only by root while auth is on: ending it
// deletes the session's ephemeral nodes, whatever their ACLs.
func (l *leaseServer) mayEnd(ctx context.Context, c *caller, id int64) error {
	if c.isRoot() {
		return nil
	}
	if err := c.authorized(); err != nil {
		return err
	}
	if l.isSession(ctx, id) {
		return rpctypes.ErrGRPCPermissionDenied
	}
	return c.leaseWritable(l.s.leaseKeysOf(ctx), id)
}

// isSession says whether lease id is a ZooKeeper session.
func (l *leaseServer) isSession(ctx context.Context, id int64) bool {
	v, err := l.s.b.Read(ctx, 0)
	if err != nil {
		return false
	}
	defer v.Close()
	le, err := v.Lease(id)
	return err == nil && le != nil && le.Session != nil
}

func (l *leaseServer) LeaseKeepAlive(stream grpc.BidiStreamingServer[pb.LeaseKeepAliveRequest, pb.LeaseKeepAliveResponse]) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		c, err := l.s.caller(ctx)
		if err != nil {
			return err
		}
		if err := l.mayEnd(ctx, c, req.ID); err != nil {
			return err
		}
		resp := &pb.LeaseKeepAliveResponse{ID: req.ID}
		ttl, err := l.keepAlive(ctx, req.ID)
		switch {
		case err == nil:
			resp.TTL = ttl
		case errors.Is(err, &core.Error{Code: core.CodeLeaseNotFound}):
			// An unknown lease is answered with TTL 0, not an error:
			// that is how clients learn it expired.
		default:
			return grpcError(err)
		}
		resp.Header = l.s.header(l.s.currentRev())
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// keepAliveHold bounds how long one keep-alive waits for a leader before
// the stream ends with etcd's "no leader" error; clientv3 opens a new
// stream half a second later and sends its keep-alives again. A lease is
// never answered "not found" (TTL 0, which clients take as expiry) for
// want of a leader: only a leader that has applied its revocation says so.
const keepAliveHold = 3 * time.Second

// keepAlive renews lease id, waiting for a leader up to keepAliveHold.
func (l *leaseServer) keepAlive(ctx context.Context, id int64) (int64, error) {
	hold, cancel := context.WithTimeout(ctx, keepAliveHold)
	defer cancel()
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		ttl, err := l.s.b.Leases().KeepAlive(hold, id)
		if err == nil || core.CodeOf(err) == core.CodeLeaseNotFound || ctx.Err() != nil {
			return ttl, err
		}
		select {
		case <-hold.Done():
			if errors.Is(err, core.ErrNoLeader) || errors.Is(err, core.ErrLeaderChanged) {
				return 0, err
			}
			return 0, fmt.Errorf("keep-alive of lease %x: %w (%v)", id, core.ErrNoLeader, err)
		case <-time.After(wait):
		}
	}
}

func (l *leaseServer) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	if err := l.s.b.Linearize(ctx); err != nil {
		return nil, grpcError(err)
	}
	c, err := l.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	v, err := l.s.b.Read(ctx, 0)
	if err != nil {
		return nil, grpcError(err)
	}
	defer v.Close()
	if err := l.mayRead(c, v, r.ID); err != nil {
		return nil, err
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: l.s.header(v.Rev()), ID: r.ID, TTL: -1}
	le, err := v.Lease(r.ID)
	if err != nil {
		return nil, grpcError(err)
	}
	if le == nil {
		// etcd answers an unknown lease with TTL -1, not an error.
		return resp, nil
	}
	resp.GrantedTTL = le.TTL
	resp.TTL = le.TTL
	if ms, ok := l.s.b.Leases().Remaining(r.ID); ok {
		resp.TTL = max(ms/1000, 0)
	}
	if r.Keys {
		err := v.LeaseKeys(r.ID, func(k []byte) bool {
			resp.Keys = append(resp.Keys, append([]byte(nil), k...))
			return true
		})
		if err != nil {
			return nil, grpcError(err)
		}
	}
	return resp, nil
}

func (l *leaseServer) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	if err := l.s.b.Linearize(ctx); err != nil {
		return nil, grpcError(err)
	}
	c, err := l.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	v, err := l.s.b.Read(ctx, 0)
	if err != nil {
		return nil, grpcError(err)
	}
	defer v.Close()
	resp := &pb.LeaseLeasesResponse{Header: l.s.header(v.Rev())}
	var ids []int64
	err = v.Leases(func(le *core.Lease) bool {
		// A ZooKeeper session's ID is its credential (with the
		// password): only root sees it while auth is on.
		if le.Session == nil || c.isRoot() {
			ids = append(ids, le.ID)
		}
		return true
	})
	if err != nil {
		return nil, grpcError(err)
	}
	for _, id := range ids {
		if err := l.mayRead(c, v, id); err != nil {
			return nil, err
		}
		resp.Leases = append(resp.Leases, &pb.LeaseStatus{ID: id})
	}
	return resp, nil
}

// mayRead checks, as etcd does, that a caller asking about lease id may
// read every key attached to it; and that only root asks about a
// ZooKeeper session while auth is on.
func (l *leaseServer) mayRead(c *caller, v core.View, id int64) error {
	if c.isRoot() {
		return nil
	}
	if err := c.authorized(); err != nil {
		return err
	}
	le, err := v.Lease(id)
	if err != nil {
		return grpcError(err)
	}
	if le != nil && le.Session != nil {
		return rpctypes.ErrGRPCPermissionDenied
	}
	var denied error
	err = v.LeaseKeys(id, func(k []byte) bool {
		denied = c.may(k, nil, core.AuthRead)
		return denied == nil
	})
	if err != nil {
		return grpcError(err)
	}
	return denied
}
