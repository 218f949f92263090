package etcdapi

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc"
)

// The lock and election services are, as in etcd, clients of this
// server's own KV, Lease and Watch API running the concurrency recipes on
// behalf of the caller, over the in-process connection.

// errMissingLeaderKey is etcd's answer to a request without its leader key.
var errMissingLeaderKey = errors.New(`"leader" field must be provided`)

// innerClient is a clientv3.Client over the in-process connection, made
// on first use and closed by Stop.
type innerClient struct {
	s    *Server
	once sync.Once
	c    *clientv3.Client
}

func (ic *innerClient) get() *clientv3.Client {
	ic.once.Do(func() {
		c := clientv3.NewCtxClient(ic.s.ctx)
		c.KV = clientv3.NewKVFromKVClient(pb.NewKVClient(ic.s.innerConn), c)
		c.Lease = clientv3.NewLeaseFromLeaseClient(pb.NewLeaseClient(ic.s.innerConn), c, time.Second)
		c.Watcher = clientv3.NewWatchFromWatchClient(pb.NewWatchClient(ic.s.innerConn), c)
		ic.c = c
	})
	return ic.c
}

func (ic *innerClient) close() {
	ic.once.Do(func() {}) // no client may be made after this
	if ic.c != nil {
		ic.c.Lease.Close()
		ic.c.Watcher.Close()
	}
}

// session returns a concurrency session on an existing lease that the
// caller keeps alive, not this server.
func (ic *innerClient) session(ctx context.Context, lease int64) (*concurrency.Session, error) {
	s, err := concurrency.NewSession(ic.get(), concurrency.WithLease(clientv3.LeaseID(lease)), concurrency.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	s.Orphan()
	return s, nil
}

type lockServer struct {
	v3lockpb.UnimplementedLockServer
	s     *Server
	inner innerClient
}

func (l *lockServer) close() { l.inner.close() }

func (l *lockServer) Lock(ctx context.Context, r *v3lockpb.LockRequest) (*v3lockpb.LockResponse, error) {
	sess, err := l.inner.session(ctx, r.Lease)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(sess, string(r.Name))
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return &v3lockpb.LockResponse{Header: m.Header(), Key: []byte(m.Key())}, nil
}

func (l *lockServer) Unlock(ctx context.Context, r *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	resp, err := l.inner.get().Delete(ctx, string(r.Key))
	if err != nil {
		return nil, err
	}
	return &v3lockpb.UnlockResponse{Header: resp.Header}, nil
}

type electionServer struct {
	v3electionpb.UnimplementedElectionServer
	s *Server
}

func (e *electionServer) inner() *innerClient { return &e.s.lockSvc.inner }

func (e *electionServer) Campaign(ctx context.Context, r *v3electionpb.CampaignRequest) (*v3electionpb.CampaignResponse, error) {
	sess, err := e.inner().session(ctx, r.Lease)
	if err != nil {
		return nil, err
	}
	el := concurrency.NewElection(sess, string(r.Name))
	if err := el.Campaign(ctx, string(r.Value)); err != nil {
		return nil, err
	}
	return &v3electionpb.CampaignResponse{
		Header: el.Header(),
		Leader: &v3electionpb.LeaderKey{Name: r.Name, Key: []byte(el.Key()), Rev: el.Rev(), Lease: int64(sess.Lease())},
	}, nil
}

func (e *electionServer) Proclaim(ctx context.Context, r *v3electionpb.ProclaimRequest) (*v3electionpb.ProclaimResponse, error) {
	if r.Leader == nil {
		return nil, errMissingLeaderKey
	}
	sess, err := e.inner().session(ctx, r.Leader.Lease)
	if err != nil {
		return nil, err
	}
	el := concurrency.ResumeElection(sess, string(r.Leader.Name), string(r.Leader.Key), r.Leader.Rev)
	if err := el.Proclaim(ctx, string(r.Value)); err != nil {
		return nil, err
	}
	return &v3electionpb.ProclaimResponse{Header: el.Header()}, nil
}

func (e *electionServer) Observe(r *v3electionpb.LeaderRequest, stream grpc.ServerStreamingServer[v3electionpb.LeaderResponse]) error {
	ctx := stream.Context()
	sess, err := e.inner().session(ctx, -1)
	if err != nil {
		return err
	}
	ch := concurrency.NewElection(sess, string(r.Name)).Observe(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, ok := <-ch:
			if !ok {
				return ctx.Err()
			}
			if err := stream.Send(&v3electionpb.LeaderResponse{Header: resp.Header, Kv: resp.Kvs[0]}); err != nil {
				return err
			}
		}
	}
}

func (e *electionServer) Leader(ctx context.Context, r *v3electionpb.LeaderRequest) (*v3electionpb.LeaderResponse, error) {
	sess, err := e.inner().session(ctx, -1)
	if err != nil {
		return nil, err
	}
	resp, err := concurrency.NewElection(sess, string(r.Name)).Leader(ctx)
	if err != nil {
		return nil, err
	}
	return &v3electionpb.LeaderResponse{Header: resp.Header, Kv: resp.Kvs[0]}, nil
}

func (e *electionServer) Resign(ctx context.Context, r *v3electionpb.ResignRequest) (*v3electionpb.ResignResponse, error) {
	if r.Leader == nil {
		return nil, errMissingLeaderKey
	}
	sess, err := e.inner().session(ctx, r.Leader.Lease)
	if err != nil {
		return nil, err
	}
	el := concurrency.ResumeElection(sess, string(r.Leader.Name), string(r.Leader.Key), r.Leader.Rev)
	if err := el.Resign(ctx); err != nil {
		return nil, err
	}
	return &v3electionpb.ResignResponse{Header: el.Header()}, nil
}
