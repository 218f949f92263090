package etcdapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/core"
)

// maxLearners is etcd's default --max-learners: how many learners
// (Janus observers) a MemberAdd --learner may leave in the cluster.
const maxLearners = 1

type clusterServer struct {
	pb.UnimplementedClusterServer
	s *Server
}

// defaultPeerURL is etcd's default --initial-advertise-peer-urls.
const defaultPeerURL = "http://localhost:2380"

// MemberList lists the active configuration. Its header carries no
// revision, as in etcd; Linearizable first confirms with the leader that
// this member has applied every change committed before the call.
func (c *clusterServer) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if r.Linearizable {
		if err := c.s.b.Linearize(ctx); err != nil {
			return nil, grpcError(err)
		}
	}
	st := c.s.b.Status()
	members := st.Members
	if len(members) == 0 {
		members = []core.ClusterMember{{ID: st.MemberID, Name: c.s.cfg.MemberName, IsLeader: true}}
	}
	return &pb.MemberListResponse{Header: c.s.header(0), Members: c.protoMembers(st.MemberID, members)}, nil
}

// protoMembers converts members as etcd lists them; self is the answering
// member, which knows its own client URLs.
func (c *clusterServer) protoMembers(self uint64, members []core.ClusterMember) []*pb.Member {
	out := make([]*pb.Member, 0, len(members))
	for _, mem := range members {
		pm := &pb.Member{ID: mem.ID, Name: mem.Name, IsLearner: mem.IsObserver, PeerURLs: []string{mem.PeerURL}}
		if mem.PeerURL == "" {
			// etcd always lists a peer URL: a single member that has no
			// peer address shows the one etcd advertises by default.
			pm.PeerURLs = []string{defaultPeerURL}
		}
		switch {
		case mem.EtcdURL != "":
			pm.ClientURLs = []string{mem.EtcdURL}
		case mem.ID == self && mem.Name != "":
			pm.ClientURLs = c.s.clientURLs()
		}
		out = append(out, pm)
	}
	return out
}

// changeRetry is how long a change waits before trying again when another
// change is pending or committed since it read the configuration: etcd
// queues concurrent changes in its log, Janus runs one at a time.
const changeRetry = 20 * time.Millisecond

// change applies edit to the active configuration and commits the result,
// reading the configuration afresh whenever another change got in first.
// edit returns etcd's refusal, if any, or the new member list.
func (c *clusterServer) change(ctx context.Context, edit func(core.Cluster) ([]core.ClusterMember, error)) (core.Cluster, error) {
	for {
		cur, err := c.s.b.Cluster(ctx)
		if err != nil {
			return core.Cluster{}, grpcError(err)
		}
		members, err := edit(cur)
		if err != nil {
			return core.Cluster{}, err
		}
		next, err := c.s.b.ChangeCluster(ctx, cur.Version, members)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, core.ErrChangePending) && !errors.Is(err, core.ErrStaleCluster) {
			return core.Cluster{}, clusterError(err)
		}
		select {
		case <-ctx.Done():
			return core.Cluster{}, grpcError(ctx.Err())
		case <-time.After(changeRetry):
		}
	}
}

// clusterError maps a refused change to etcd's error.
func clusterError(err error) error {
	switch {
	case errors.Is(err, core.ErrNotCaughtUp):
		return rpctypes.ErrGRPCLearnerNotReady
	case errors.Is(err, core.ErrUnhealthy):
		return rpctypes.ErrGRPCUnhealthy
	case errors.Is(err, core.ErrNotReplicated):
		// A single member started without peers, so without a peer
		// address: a real etcd accepts a first peer (its default peer URL
		// is a localhost one), but a peer added here could never reach
		// this member, so it answers as etcd's strict check does when
		// too few members are started. A single member started with
		// --peers naming itself takes the change.
		return rpctypes.ErrGRPCMemberNotEnoughStarted
	}
	return grpcError(err)
}

// peerURLs checks a request's peer URLs as etcd does. Janus members have
// one peer address each.
func peerURLs(urls []string) (string, error) {
	parsed, err := types.NewURLs(urls)
	if err != nil {
		return "", rpctypes.ErrGRPCMemberBadURLs
	}
	if len(parsed) != 1 {
		return "", status.Error(codes.InvalidArgument, "janus: a member has exactly one peer URL")
	}
	return parsed[0].String(), nil
}

// peerURLTaken reports whether a member other than id has url.
func peerURLTaken(cl core.Cluster, id uint64, url string) bool {
	return slices.ContainsFunc(cl.Members, func(m core.ClusterMember) bool { return m.ID != id && m.PeerURL == url })
}

// MemberAdd adds a member, a voter at once or a learner (a Janus
// observer), with the next unused ID. Like etcd's, the new member has no
// name until it starts and publishes its own.
func (c *clusterServer) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	if err := c.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	url, err := peerURLs(r.PeerURLs)
	if err != nil {
		return nil, err
	}
	var added core.ClusterMember
	next, err := c.change(ctx, func(cur core.Cluster) ([]core.ClusterMember, error) {
		if peerURLTaken(cur, 0, url) {
			return nil, rpctypes.ErrGRPCPeerURLExist
		}
		if r.IsLearner {
			learners := 0
			for _, m := range cur.Members {
				if m.IsObserver {
					learners++
				}
			}
			if learners+1 > maxLearners {
				return nil, rpctypes.ErrGRPCTooManyLearners
			}
		}
		added = core.ClusterMember{ID: cur.NextMemberID(), PeerURL: url, IsObserver: r.IsLearner}
		return append(slices.Clone(cur.Members), added), nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.MemberAddResponse{
		Header:  c.header(),
		Member:  &pb.Member{ID: added.ID, PeerURLs: []string{added.PeerURL}, IsLearner: added.IsObserver},
		Members: c.protoMembers(c.s.b.Status().MemberID, next.Members),
	}, nil
}

// MemberRemove removes a member, this one or the leader included.
func (c *clusterServer) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if err := c.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	next, err := c.change(ctx, func(cur core.Cluster) ([]core.ClusterMember, error) {
		if _, ok := cur.Member(r.ID); !ok {
			return nil, rpctypes.ErrGRPCMemberNotFound
		}
		rest := slices.DeleteFunc(slices.Clone(cur.Members), func(m core.ClusterMember) bool { return m.ID == r.ID })
		if !slices.ContainsFunc(rest, func(m core.ClusterMember) bool { return !m.IsObserver }) {
			return nil, rpctypes.ErrGRPCMemberNotEnoughStarted
		}
		return rest, nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.MemberRemoveResponse{Header: c.header(), Members: c.protoMembers(c.s.b.Status().MemberID, next.Members)}, nil
}

// MemberUpdate changes a member's peer URL.
func (c *clusterServer) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if err := c.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	url, err := peerURLs(r.PeerURLs)
	if err != nil {
		return nil, err
	}
	next, err := c.change(ctx, func(cur core.Cluster) ([]core.ClusterMember, error) {
		if _, ok := cur.Member(r.ID); !ok {
			return nil, rpctypes.ErrGRPCMemberNotFound
		}
		if peerURLTaken(cur, r.ID, url) {
			return nil, rpctypes.ErrGRPCPeerURLExist
		}
		out := slices.Clone(cur.Members)
		for i := range out {
			if out[i].ID == r.ID {
				out[i].PeerURL = url
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.MemberUpdateResponse{Header: c.header(), Members: c.protoMembers(c.s.b.Status().MemberID, next.Members)}, nil
}

// MemberPromote makes a learner a voter once it has caught up with the
// leader (ErrGRPCLearnerNotReady before).
func (c *clusterServer) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if err := c.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	next, err := c.change(ctx, func(cur core.Cluster) ([]core.ClusterMember, error) {
		m, ok := cur.Member(r.ID)
		if !ok {
			return nil, rpctypes.ErrGRPCMemberNotFound
		}
		if !m.IsObserver {
			return nil, rpctypes.ErrGRPCMemberNotLearner
		}
		out := slices.Clone(cur.Members)
		for i := range out {
			if out[i].ID == r.ID {
				out[i].IsObserver = false
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.MemberPromoteResponse{Header: c.header(), Members: c.protoMembers(c.s.b.Status().MemberID, next.Members)}, nil
}

// header is the header etcd's Cluster service answers with: no revision,
// and the status read after the change (its term may have moved).
func (c *clusterServer) header() *pb.ResponseHeader {
	st := c.s.b.Status()
	return &pb.ResponseHeader{ClusterId: st.ClusterID, MemberId: st.MemberID, RaftTerm: st.Epoch}
}

// errGRPCTimeoutLeaderTransfer is what etcd answers when the target did not
// take over before the request's deadline: its server error, which its
// gRPC layer passes on with code Unknown.
var errGRPCTimeoutLeaderTransfer = status.Error(codes.Unknown, "etcdserver: request timed out, leader transfer took too long")

// MoveLeader hands the leadership to another voter. Like etcd, only the
// leader takes it (etcdctl move-leader looks for the leader among its
// endpoints); it answers once the target leads.
func (m *maintenanceServer) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if err := m.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	st := m.s.b.Status()
	if st.LeaderID != 0 && st.LeaderID != st.MemberID {
		return nil, rpctypes.ErrGRPCNotLeader
	}
	target, ok := (core.Cluster{Members: st.Members}).Member(r.TargetID)
	if !ok || target.IsObserver {
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	if r.TargetID == st.MemberID {
		return &pb.MoveLeaderResponse{}, nil
	}
	err := m.s.b.MoveLeader(ctx, r.TargetID)
	switch {
	case err == nil:
		return &pb.MoveLeaderResponse{}, nil
	case errors.Is(err, core.ErrNotVoter), errors.Is(err, core.ErrNotReplicated):
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	case errors.Is(err, core.ErrTransferTimeout), errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return nil, errGRPCTimeoutLeaderTransfer
	}
	return nil, grpcError(fmt.Errorf("move leader: %w", err))
}
