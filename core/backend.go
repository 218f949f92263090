package core

import "context"

// Backend is what a protocol face needs from the member it runs in. The
// faces translate their requests into Ops and reads on a View; they never
// reach the store, the log or each other.
type Backend interface {
	// Propose orders op through the log and returns its result once the
	// local replica has applied it, so the caller reads its own write.
	Propose(ctx context.Context, op *Op) (*Result, error)
	// Submit fixes op's place in the log order and returns without
	// waiting: ops one goroutine submits one after another commit in that
	// order, so a session can keep several writes in flight. ctx governs
	// the op until it is written, as for Propose.
	Submit(ctx context.Context, op *Op) (Pending, error)
	// Read returns a consistent View at revision rev (0: the latest
	// applied state), or ErrCompacted / ErrFutureRev.
	Read(ctx context.Context, rev int64) (ReadView, error)
	// Rev returns the latest applied revision, which Read(ctx, 0) would
	// show, without opening a view; it fails when Read would (ErrCorrupt,
	// ErrStopped).
	Rev() (int64, error)
	// Census returns the counts of the latest applied state (keys, znodes,
	// ephemerals, leases, sessions), kept as entries apply rather than
	// counted by a walk; it fails when Read would.
	Census() (Census, error)
	// Linearize returns once the local replica has applied every write
	// committed before the call: a linearizable etcd read or ZooKeeper's
	// sync runs it first.
	Linearize(ctx context.Context) error
	// Watch subscribes to the events of every revision from rev on (0:
	// from the next revision).
	Watch(rev int64) (*Subscription, error)
	// Leases answers lease and session liveness questions; the leader's
	// lessor keeps the remaining time to live, which the log does not.
	Leases() Lessor
	// Status describes the member.
	Status() Status
	// Defragment gives back the disk space that deletes and compactions
	// freed in this member's store (etcd's defrag); it changes no state.
	Defragment(ctx context.Context) error
	// Alarms are the active alarms, the same on every member (etcd's
	// alarm list). A CORRUPT alarm naming this member, or member 0, means
	// it refuses to serve clients (ErrCorrupt).
	Alarms() []Alarm
	// Auth is etcd's auth store as the member has applied it. It is
	// shared: callers must not modify it.
	Auth() *AuthState
	// Cluster returns the active configuration as this member has
	// applied it.
	Cluster(ctx context.Context) (Cluster, error)
	// ChangeCluster proposes members as the whole new configuration
	// replacing the one of version (IsObserver says observer, etcd's
	// learner) and returns the committed configuration. A follower
	// forwards it to the leader. New members must come with an ID the
	// caller chose (Cluster.NextMemberID for one never used before).
	// Refusals (nothing proposed): ErrChangePending, ErrStaleCluster,
	// ErrNotCaughtUp, ErrUnhealthy, ErrNotReplicated.
	ChangeCluster(ctx context.Context, version uint64, members []ClusterMember) (Cluster, error)
	// MoveLeader makes target, a voter, the leader and returns once it
	// leads (ErrNotVoter if it does not vote, ErrNotReplicated for a
	// single member). A follower forwards it to the leader.
	MoveLeader(ctx context.Context, target uint64) error
}

// Pending is a submitted op.
type Pending interface {
	// Wait returns the op's result once the local replica has applied it.
	Wait(ctx context.Context) (*Result, error)
	// Answered reports whether the result is in: Wait would return at
	// once.
	Answered() bool
}

// ReadView is a View that belongs to one reader.
type ReadView interface {
	View
	// Rev is the revision this view shows.
	Rev() int64
	// Close releases the view.
	Close()
}

// Lessor tracks the remaining time to live of leases and sessions.
type Lessor interface {
	// NewID returns an unused lease ID, positive and unpredictable.
	NewID() int64
	// KeepAlive restarts the lease's countdown and returns its TTL in
	// seconds, or an Error with CodeLeaseNotFound once the leader has
	// decided the lease is gone (its revocation applied). Any other error
	// (no leader, a leader that did not answer) says nothing about the
	// lease: callers retry rather than report it expired.
	KeepAlive(ctx context.Context, id int64) (int64, error)
	// Remaining returns the lease's remaining time to live in
	// milliseconds and whether the lease exists.
	Remaining(id int64) (int64, bool)
	// MinTTL is the smallest TTL, in seconds, a grant is raised to.
	MinTTL() int64
}

// Status describes a member for the faces' status and admin commands.
type Status struct {
	ClusterID    uint64
	MemberID     uint64
	LeaderID     uint64
	Epoch        uint64 // Zab epoch: etcd's raft term
	AppliedIndex uint64 // etcd's raft applied index
	CommitIndex  uint64
	Rev          int64
	CompactRev   int64
	DBSize       int64
	// QuotaBytes is the space quota (etcd's --quota-backend-bytes), 0
	// for none.
	QuotaBytes int64
	Members    []ClusterMember
	// Err is why the member stopped applying the log (an I/O or apply
	// failure), nil while it runs. A stopped member serves nothing more.
	Err error
	// Alarms are the member's raised alarms by etcd's names (NOSPACE,
	// CORRUPT).
	Alarms []string
	// Corrupt says a CORRUPT alarm names this member (or the whole
	// cluster): it refuses clients rather than answer from its state.
	// Alarms are replicated, so the healthy members list the alarm too,
	// with Corrupt false.
	Corrupt bool
}

// Serving reports whether a member with this status is healthy in etcd's
// sense: it has not stopped, it knows a leader, and no alarm is raised
// anywhere in the cluster. etcd's health checks ask it.
func (s Status) Serving() bool {
	return s.Err == nil && s.LeaderID != 0 && len(s.Alarms) == 0
}

// ServesSessions reports whether this member serves ZooKeeper sessions: it
// has not stopped, it knows a leader, and no CORRUPT alarm names it. An
// alarm naming another member leaves it serving, as it does for etcd
// clients; ZooKeeper's four-letter words ask this.
func (s Status) ServesSessions() bool {
	return s.Err == nil && s.LeaderID != 0 && !s.Corrupt
}

// ClusterMember is one server of the ensemble as clients should see it:
// what etcd's MemberList and ZooKeeper's srvr and conf report. (The
// running process is server.Member; its replication is zab.Member.)
type ClusterMember struct {
	ID         uint64
	Name       string
	PeerURL    string
	EtcdURL    string // etcd client URL
	ZKAddr     string // ZooKeeper client address
	IsLeader   bool
	IsObserver bool
	// ZKElectionAddr is the election address a ZooKeeper reconfig named:
	// Janus has one peer port and only shows it back.
	ZKElectionAddr string
}

// Cluster is a configuration of the ensemble: who votes, who observes.
type Cluster struct {
	// Version is the zxid of the log entry that carries the
	// configuration; 0 for the one the ensemble started with.
	Version uint64
	// Time is when that entry was accepted, by the leader's clock (unix
	// milliseconds, the same on every member); 0 for the starting one.
	Time int64
	// Members are sorted by ID, voters and observers alike; IsLeader is
	// set from the answering member's view.
	Members []ClusterMember
	// LastID is the highest member ID any configuration of the ensemble
	// has named (IDs are never reused).
	LastID uint64
}

// NextMemberID is an ID no member of the ensemble ever had.
func (c Cluster) NextMemberID() uint64 {
	last := c.LastID
	for _, m := range c.Members {
		last = max(last, m.ID)
	}
	return last + 1
}

// Member returns the member with id and whether there is one.
func (c Cluster) Member(id uint64) (ClusterMember, bool) {
	for _, m := range c.Members {
		if m.ID == id {
			return m, true
		}
	}
	return ClusterMember{}, false
}
