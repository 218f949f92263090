package etcdapi

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/core"
)

type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}

func (m *maintenanceServer) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	if err := m.s.requireUser(ctx); err != nil {
		return nil, err
	}
	st := m.s.b.Status()
	dbSize := st.DBSize
	if dbSize <= 0 {
		// etcdctl divides by the size; an empty store still occupies
		// something.
		dbSize = 1
	}
	leader := st.LeaderID
	if leader == 0 && len(st.Members) <= 1 {
		leader = st.MemberID
	}
	// etcd lists the active alarms as errors.
	var errs []string
	for _, a := range m.s.b.Alarms() {
		errs = append(errs, (&pb.AlarmMember{MemberID: a.Member, Alarm: pb.AlarmType(a.Type)}).String())
	}
	return &pb.StatusResponse{
		Header:           m.s.header(st.Rev),
		DbSizeQuota:      st.QuotaBytes,
		Errors:           errs,
		Version:          m.s.cfg.Version,
		DbSize:           dbSize,
		DbSizeInUse:      dbSize,
		Leader:           leader,
		RaftIndex:        st.CommitIndex,
		RaftTerm:         st.Epoch,
		RaftAppliedIndex: st.AppliedIndex,
		IsLearner:        m.isObserver(st),
		StorageVersion:   storageVersion(m.s.cfg.Version),
	}, nil
}

func (m *maintenanceServer) isObserver(st core.Status) bool {
	for _, mem := range st.Members {
		if mem.ID == st.MemberID {
			return mem.IsObserver
		}
	}
	return false
}

// storageVersion is the major.minor of the reported etcd version, the
// form etcd gives its storage schema version.
func storageVersion(v string) string {
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.0", major, minor)
}

// Alarm lists, raises and clears alarms as etcd does: GET lists the active
// ones of a type (NONE: all), ACTIVATE and DEACTIVATE go through the log so
// that every member lists the same, and answer with the alarm they changed
// (none if it was already so). Janus raises CORRUPT itself when a
// corruption check finds a member's state differing from the majority's;
// `etcdctl alarm disarm` clears it.
func (m *maintenanceServer) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	c, err := m.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if r.Action == pb.AlarmRequest_GET {
		err = c.known()
	} else {
		err = c.root()
	}
	if err != nil {
		return nil, err
	}
	want := core.Alarm{Member: r.MemberID, Type: core.AlarmType(r.Alarm)}
	before := m.s.b.Alarms()
	active := slices.Contains(before, want)
	resp := &pb.AlarmResponse{}
	switch r.Action {
	case pb.AlarmRequest_GET:
		for _, a := range before {
			if r.Alarm == pb.AlarmType_NONE || a.Type == want.Type {
				resp.Alarms = append(resp.Alarms, &pb.AlarmMember{MemberID: a.Member, Alarm: pb.AlarmType(a.Type)})
			}
		}
	case pb.AlarmRequest_ACTIVATE, pb.AlarmRequest_DEACTIVATE:
		activate := r.Action == pb.AlarmRequest_ACTIVATE
		if r.Alarm != pb.AlarmType_NOSPACE && r.Alarm != pb.AlarmType_CORRUPT {
			break // etcd changes nothing for an unknown alarm
		}
		res, err := m.s.b.Propose(ctx, &core.Op{Alarm: &core.AlarmChange{Activate: activate, Alarm: want}, AuthCheck: c.check(), Origin: core.OriginEtcd})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return nil, grpcError(err)
		}
		if active != activate {
			resp.Alarms = []*pb.AlarmMember{{MemberID: r.MemberID, Alarm: r.Alarm}}
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "etcdserver: unknown alarm action")
	}
	resp.Header = m.s.header(m.s.currentRev())
	return resp, nil
}

// Defragment gives back, at once, the disk space the member's deletes and
// compactions freed, as etcd's defrag does for its bbolt file.
func (m *maintenanceServer) Defragment(ctx context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := m.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	if err := m.s.b.Defragment(ctx); err != nil {
		return nil, grpcError(err)
	}
	return &pb.DefragmentResponse{Header: m.s.header(m.s.currentRev())}, nil
}

func (m *maintenanceServer) Hash(ctx context.Context, _ *pb.HashRequest) (*pb.HashResponse, error) {
	if err := m.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	v, err := m.s.b.Read(ctx, 0)
	if err != nil {
		return nil, grpcError(err)
	}
	defer v.Close()
	h, err := hashKV(v)
	if err != nil {
		return nil, grpcError(err)
	}
	return &pb.HashResponse{Header: m.s.header(v.Rev()), Hash: h}, nil
}

// HashKV digests the keyspace at a revision (0: the latest). Replicas
// that applied the same log agree on it; the value is Janus's own, not
// etcd's.
func (m *maintenanceServer) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	if err := m.s.requireRoot(ctx); err != nil {
		return nil, err
	}
	v, err := m.s.b.Read(ctx, r.Revision)
	if err != nil {
		return nil, grpcError(err)
	}
	defer v.Close()
	h, err := hashKV(v)
	if err != nil {
		return nil, grpcError(err)
	}
	meta, err := v.Meta()
	if err != nil {
		return nil, grpcError(err)
	}
	// The member's compact revision is above core's after a snapshot
	// restore (its history starts after the snapshot's revision).
	return &pb.HashKVResponse{
		Header: m.s.header(m.s.currentRev()), Hash: h,
		CompactRevision: max(meta.CompactRev, m.s.b.Status().CompactRev), HashRevision: v.Rev(),
	}, nil
}

func hashKV(v core.View) (uint32, error) {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	var num [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(num[:], uint64(len(b)))
		h.Write(num[:])
		h.Write(b)
	}
	integer := func(i int64) {
		binary.BigEndian.PutUint64(num[:], uint64(i))
		h.Write(num[:])
	}
	err := v.Range(nil, nil, func(n *core.Node) bool {
		field(n.Key)
		field(n.Value)
		integer(n.CreateRev)
		integer(n.ModRev)
		integer(n.Version)
		integer(n.Lease)
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("etcdapi: hash keyspace: %w", err)
	}
	return h.Sum32(), nil
}
