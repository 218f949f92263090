package core

import "errors"

// Errors a replicated Backend returns when the ensemble, not the op, is the
// problem. The faces map them to their protocol's own (etcd: "etcdserver:
// no leader" / "etcdserver: leader changed" / "etcdserver: server stopped",
// all Unavailable; ZooKeeper: ConnectionLoss), so clients retry or move to
// another server.
var (
	// ErrNoLeader: the member knows no leader it is synchronized with (an
	// election is running, or it is cut off from a quorum). Nothing was
	// proposed or read; the caller may retry, here or elsewhere.
	ErrNoLeader = errors.New("core: no leader")
	// ErrLeaderChanged: the leader changed before the member learned the
	// write's outcome. It may or may not commit.
	ErrLeaderChanged = errors.New("core: leader changed")
	// ErrStopped: the member has stopped (a failure ended its log writer
	// or applier, or it is closing) and serves nothing more. A write may
	// or may not have committed; the caller should go to another member.
	ErrStopped = errors.New("core: member stopped")
	// ErrCorrupt: a corruption check found this member's state (or, for
	// an alarm on member 0, the cluster's) differing from its peers', and
	// a CORRUPT alarm is active. The member refuses to answer from that
	// state until the alarm is disarmed (etcd: "etcdserver: corrupt
	// cluster"; ZooKeeper: ConnectionLoss).
	ErrCorrupt = errors.New("core: corrupt member")
)

// Errors that refuse a membership change or a leader transfer; nothing was
// proposed. The faces map them to their protocol's own.
var (
	// ErrChangePending: another change has not committed yet.
	ErrChangePending = errors.New("core: a membership change is still pending")
	// ErrStaleCluster: the change names a configuration version that is
	// no longer the active one.
	ErrStaleCluster = errors.New("core: configuration version is not the active one")
	// ErrNotCaughtUp: an observer to promote has not caught up with the
	// leader's log.
	ErrNotCaughtUp = errors.New("core: the member to promote has not caught up")
	// ErrUnhealthy: the voters of the new configuration that the leader
	// is connected to, itself included, are not a quorum of it, so the
	// change could not commit (etcd's strict reconfiguration check).
	ErrUnhealthy = errors.New("core: the new configuration has no connected quorum")
	// ErrNotReplicated: a single member started without peers (and so
	// without a peer address) cannot change its configuration or move
	// its leadership.
	ErrNotReplicated = errors.New("core: a single member has no ensemble to change")
	// ErrNotVoter: the leader transfer's target does not vote.
	ErrNotVoter = errors.New("core: the transfer target is not a voter")
	// ErrTransferTimeout: the transfer's target did not take over within
	// the transfer's deadline; the old leader leads on, or an election
	// follows.
	ErrTransferTimeout = errors.New("core: leader transfer took too long")
)
