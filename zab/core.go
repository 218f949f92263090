package zab

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"slices"
)

// Core is the whole of Zab for one member (fast leader election,
// discovery, synchronization and broadcast) as a state machine: it has no
// goroutines, no clock, no randomness but what its seed gives, no channels
// and no I/O except reads of the durable log through LogReader. A driver
// feeds it inputs (Step, Tick, Propose, ProposeMembership, ReadIndex,
// Call, LogDurable, SnapshotTaken), takes its output with Ready, and
// carries each Ready out in the order Ready's comment gives. The driver
// of a real member is replica.go (log files, log writer, applier,
// transport, ticker); a simulator can drive many Cores in one goroutine
// and replay a run from its seed.
//
// A Core is not safe for concurrent use. Everything the protocol promises
// (see the package comment's Replication contract) holds as long as the
// driver respects Ready's order and reports LogDurable only for entries
// that are on disk.
type Core struct {
	cfg     CoreConfig
	log     *slog.Logger
	rl      LogReader
	id      uint64
	etTicks uint64
	rng     *mrand.Rand
	// conf is the active configuration: its entry is committed (or it is
	// the starting one). next, when set, is a later configuration whose
	// entry this member's log holds but does not know committed; while it
	// is pending every quorum is counted in both (see quorum).
	conf  Membership
	next  *Membership
	voter bool // votes in conf or next, and is not joining
	// joining is set until a member started with CoreConfig.Join has
	// installed its first synchronization.
	joining bool
	// savedConf is the version of the configuration last persisted (or
	// recovered): a configuration entry applied again after a restart
	// (the state machine had lost its apply) is not persisted over a
	// later one.
	savedConf uint64

	// lastLeadership is the (leader, epoch) last counted in leaderChanges.
	lastLeadership [2]uint64
	leaderChanges  uint64
	started        bool // the first role has been set

	now        uint64 // ticks since start
	ep         Epochs
	role       Role
	leader     uint64
	lastIndex  uint64 // last entry assigned (leader) or received (follower), maybe not yet durable
	lastZxid   uint64
	lastTime   int64
	written    uint64 // last index handed to the log writer (through a Ready)
	durable    uint64 // last index on disk, as the driver reported it
	commit     uint64
	dispatched uint64  // last index handed to the applier (through a Ready)
	pending    []Entry // appended in memory, handed to the writer by the next Ready
	tail       []Entry // entries handed to the writer; always holds everything above dispatched
	el         election
	ls         *leaderState
	fs         *followerState
	rpcs       map[uint64]*localRPC // follower side ReadIndex and Call, by nonce
	nonceSeq   uint64
	xfer       *transferState // a leader transfer this member asked for, until answered
	prefer     preference     // a transfer target to prefer in the next election

	rd        Ready // output accumulated since the last Ready call
	urgent    bool  // rd holds a drain, a synchronization or epochs
	peersTick bool  // refresh rd.PeerAcked at the next Ready
}

// CoreConfig configures a Core. The recovered fields describe the member's
// durable state when the Core starts.
type CoreConfig struct {
	ID        uint64   // this member
	Voters    []uint64 // every voting member, this one included if it votes
	Observers []uint64 // every observer, this one included if it observes
	// Addrs are the members' peer addresses in the starting
	// configuration (Voters and Observers); a change names them all.
	Addrs map[uint64]string
	// ElectionTicks is the election timeout in ticks (at least 2): how
	// long a follower waits without hearing its leader, a leader without
	// hearing a quorum, and the base of every election and
	// synchronization attempt's random deadline (one to two of it).
	ElectionTicks uint64
	// MaxDiffEntries bounds how many entries a leader sends to synchronize
	// a follower; one further behind is sent a snapshot.
	MaxDiffEntries int
	// CanSnapshot says whether the driver's state machine can take and
	// restore snapshots (SNAP). Without it a follower that needs one waits.
	CanSnapshot bool
	// Seed seeds every random choice the Core makes (election timeouts,
	// notification backoff, nonces): two Cores given the same seed and the
	// same inputs produce the same Readies.
	Seed [2]uint64
	// Log reads the durable log.
	Log    LogReader
	Logger *slog.Logger // nil discards logs

	// Recovered state.
	Epochs    Epochs
	LastIndex uint64 // last entry on disk
	LastZxid  uint64 // its zxid (the log base's when the log is empty)
	LastTime  int64  // its Time
	// Applied is the state machine's applied index: nothing above it is
	// known committed until a leader says so.
	Applied uint64
	// Unapplied are the entries on disk above Applied, in order.
	Unapplied []Entry
	// Membership is the last committed configuration the member persisted
	// (Ready.Membership); nil for a member that never persisted one, which
	// starts from Voters and Observers (version 0). A configuration entry
	// in Unapplied above it is pending until a leader says it committed.
	Membership *Membership
	// Join, for a member that never persisted a configuration, makes it
	// join a running ensemble: Voters and Observers only say where to
	// find it, and the member has no vote until its first
	// synchronization gives it the leader's configuration, which it then
	// persists. Ignored when Membership is set.
	Join bool
}

// LogReader reads a member's durable log for its Core. The Core asks only
// for entries and positions at or below the last index it knows durable,
// and only between Readies it has seen carried out; it may be called from
// inside any input method.
type LogReader interface {
	// Entries returns the entries with indexes from through to, in order.
	Entries(from, to uint64) ([]Entry, error)
	// ZxidAt returns the zxid of the entry at index, or of the log's base
	// when index is the base (the index the log starts after); false if
	// the log no longer knows it.
	ZxidAt(index uint64) (uint64, bool)
	// IndexAtOrBelow returns the highest index whose zxid is at most zxid
	// among the entries the log holds and its base; false if even the
	// base is above zxid or unknown (the answer is in trimmed history).
	IndexAtOrBelow(zxid uint64) (uint64, bool)
	// FirstIndex returns the oldest index the log holds (0 if none).
	FirstIndex() uint64
}

// Role is what a member is in its ensemble.
type Role uint8

// Roles reported by Status, RoleChanges and Ready. Their strings are the
// names Status, logs and JSON output show.
const (
	RoleLooking  Role = iota // no leader: electing, discovering or synchronizing
	RoleFollower             // synchronized with a leader; votes
	RoleObserver             // synchronized with a leader; never votes
	RoleLeader               // leads the ensemble and has a synchronized quorum
	RoleRemoved              // a committed configuration no longer names it; it takes part in nothing
)

var roleNames = [...]string{RoleLooking: "looking", RoleFollower: "follower", RoleObserver: "observer", RoleLeader: "leader", RoleRemoved: "removed"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// MarshalText renders the role as its name, so JSON and text logs show
// "leader" rather than a number.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Proposal is a local proposal handed to Core.Propose.
type Proposal struct {
	ReqID uint64 // unique among this member's proposals; the entry carries it
	Data  []byte
	// LeaderEpoch, when not 0, fences the proposal to this member's
	// leadership of that epoch (see Member.SubmitAsLeader).
	LeaderEpoch uint32
	// Time is the caller's wall clock (unix milliseconds); the entry's
	// Time is the larger of it and the previous entry's.
	Time int64
}

// SyncInstall is a synchronization a follower installs: restore Snapshot
// (if set) and restart the log at it, or else truncate the log after
// TruncateAfter (if Truncate), then append Entries. All of it is durable
// (fdatasync'ed, the restored state synced) before the driver goes on.
type SyncInstall struct {
	Snapshot      *SnapshotData
	Truncate      bool
	TruncateAfter uint64
	Entries       []Entry
}

// SnapshotData is a state machine snapshot and the log position it
// reflects.
type SnapshotData struct {
	Index, Zxid uint64
	Data        []byte
}

// SnapshotRequest asks the driver to take a snapshot of the state machine
// for peer (between applies) and report it with SnapshotTaken.
type SnapshotRequest struct {
	Peer, Nonce uint64
}

// Snapshot is the driver's answer to a SnapshotRequest: the snapshot and
// the zxid of its index, or Err.
type Snapshot struct {
	Peer, Nonce uint64
	SnapshotData
	Err error
}

// Outbound is a message to send.
type Outbound struct {
	To  uint64
	Msg Message
}

// LeaderCall is a follower's CallLeader that this leader serves: the
// driver runs its leader handler on Payload and sends To a CALLRESP with
// Nonce and the handler's answer.
type LeaderCall struct {
	From, Nonce uint64
	Payload     []byte
}

// Refusal fails one local proposal (by ReqID) with Err; nothing of it was
// proposed, or (ErrLeaderChanged) its outcome is unknown.
type Refusal struct {
	ReqID uint64
	Err   error
}

// Answer answers a local ReadIndex or Call by its ID. For a Call, Err is
// errRunLocally when this member leads: the driver runs the handler itself.
type Answer struct {
	ID    uint64
	Index uint64 // ReadIndex
	Data  []byte // Call
	Err   error
}

// RoundTrip says that Peer answered heartbeat round Round, the latest one
// sent (see Ready.HeartbeatRound): the driver measures the time between.
type RoundTrip struct {
	Peer, Round uint64
}

// CoreStatus is the Core's part of Status.
type CoreStatus struct {
	Role           Role
	LeaderID       uint64 // 0 while looking
	Epoch          uint32
	AcceptedEpoch  uint32
	LastZxid       uint64
	LastIndex      uint64 // last index on disk
	CommittedIndex uint64
	LeaderChanges  uint64
}

// Ready is what the Core asks of its driver. The driver carries out each
// Ready completely, in this order, before it passes the Core an input it
// received after taking the Ready (it may batch several inputs before
// taking one, unless Urgent says otherwise):
//
//  1. Drain: if set, wait until everything handed to the log writer by
//     earlier Readies is durable (a leader or follower leaving its role:
//     the log, lastZxid and the durable index agree again before a vote
//     or FOLLOWERINFO names them, and before Sync changes the log).
//  2. Sync: install it durably (snapshot restored and synced, log restarted
//     at it or truncated, entries appended and fdatasync'ed).
//  3. Membership, then Committed: if Membership is set, persist it
//     (atomically, durably) as the last committed configuration; then
//     hand Committed to the applier, in order. Committed entries are
//     committed and durable on this member (through LogDurable, or Sync
//     of this Ready). Membership goes first so that a restarted member
//     never holds an applied configuration entry its membership file
//     does not reflect.
//  4. Epochs: if set, persist them (atomically, durably). They come after
//     Sync and Committed (a follower's currentEpoch is persisted only once
//     its synchronization is durable and committed entries are with the
//     applier) and before every message of this Ready (acceptedEpoch
//     before ACKEPOCH and LEADERINFO; currentEpoch before ACKNEWLEADER).
//  5. Entries: hand these to the group-commit log writer; it writes
//     asynchronously and reports with LogDurable. The Core counts an
//     entry as on this member's disk, and acknowledges it (ACK), only
//     after LogDurable says so, never earlier.
//  6. Messages: send them. They may go while the writer is still writing
//     step 5's entries (a leader's PROPOSAL overlaps its own write), but
//     never before steps 1-4 are done.
//  7. The rest, in any order: Refused and FailProposals (after Committed,
//     so a proposal whose entry was handed over is not failed), Answers,
//     Transfers, Calls, SnapshotRequests, RoleChanges, RoundTrips, Status.
//
// Fatal, when set, is an error the protocol cannot go on past: the driver
// stops the member (after nothing else of this Ready).
type Ready struct {
	Drain      bool
	Sync       *SyncInstall
	Membership *Membership
	Committed  []Entry
	Epochs     *Epochs
	Entries    []Entry
	Messages   []Outbound

	Refused []Refusal
	// FailProposals, when set, fails every local proposal whose entry has
	// not been handed to the applier (this Ready's Committed included):
	// the role they were made under ended.
	FailProposals    error
	Answers          []Answer
	Transfers        []TransferDone
	Calls            []LeaderCall
	SnapshotRequests []SnapshotRequest
	RoleChanges      []RoleChange
	// HeartbeatRound, when not 0, is the heartbeat round this Ready's
	// messages start (the driver notes when); RoundTrips are peers'
	// answers to the latest round.
	HeartbeatRound uint64
	RoundTrips     []RoundTrip
	// PeerAcked, when not nil, is the leader's view of each synchronized
	// peer's durable index, refreshed once a tick.
	PeerAcked map[uint64]uint64
	Status    CoreStatus
	Fatal     error
}

const (
	finalizeTicks = 2    // how long a quorum of votes must stand before the election ends
	recentEntries = 4096 // entries kept in memory after applying, for resending
	maxResend     = 1024 // entries per retransmitted PROPOSAL
)

// errRunLocally answers a local Call on the leader: the driver runs the
// handler itself.
var errRunLocally = errors.New("zab: this member leads")

// localRPC is a follower's ReadIndex or Call waiting for the leader.
type localRPC struct {
	id      uint64
	expires uint64
}

// NewCore returns a Core in the looking state, having started an
// election: its first Ready holds the first notifications.
func NewCore(cfg CoreConfig) (*Core, error) {
	if cfg.ElectionTicks < 2 {
		return nil, fmt.Errorf("zab: core: election timeout of %d ticks, need at least 2", cfg.ElectionTicks)
	}
	if cfg.Log == nil {
		return nil, errors.New("zab: core: no LogReader")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Core{
		cfg: cfg, log: cfg.Logger, rl: cfg.Log, id: cfg.ID,
		etTicks:    cfg.ElectionTicks,
		rng:        mrand.New(mrand.NewPCG(cfg.Seed[0], cfg.Seed[1])),
		ep:         cfg.Epochs,
		lastIndex:  cfg.LastIndex,
		lastZxid:   cfg.LastZxid,
		lastTime:   cfg.LastTime,
		written:    cfg.LastIndex,
		durable:    cfg.LastIndex,
		commit:     cfg.Applied,
		dispatched: cfg.Applied,
		tail:       slices.Clone(cfg.Unapplied),
		rpcs:       make(map[uint64]*localRPC),
	}
	var conf Membership
	if cfg.Membership != nil {
		conf = cloneMembership(*cfg.Membership)
	} else {
		var err error
		if conf, err = NewMembership(cfg.Voters, cfg.Observers); err != nil {
			return nil, fmt.Errorf("zab: core: %w", err)
		}
		for _, id := range conf.members() {
			if a := cfg.Addrs[id]; a != "" {
				if conf.Addrs == nil {
					conf.Addrs = make(map[uint64]string)
				}
				conf.Addrs[id] = a
			}
		}
	}
	c.joining = cfg.Join && cfg.Membership == nil
	c.setMembership(conf, nil)
	c.savedConf = conf.Version
	for _, e := range cfg.Unapplied {
		if e.Kind == EntryMembership && e.Index > conf.Index {
			if err := c.notePending(e); err != nil {
				return nil, fmt.Errorf("zab: core: %w", err)
			}
		}
	}
	c.becomeLooking("start")
	return c, nil
}

// ---- inputs ----

// Step takes a message from a peer. now is the wall clock (unix
// milliseconds) that stamps entries a leader proposes for a forwarded
// REQUEST.
func (c *Core) Step(from uint64, msg Message, now int64) {
	if c.role == RoleRemoved {
		return
	}
	if msg.Type == MsgNotification {
		c.handleNotification(from, &msg)
		return
	}
	if c.ls != nil {
		c.leaderHandle(from, &msg, now)
		c.checkTransfer()
		return
	}
	if c.fs != nil && from == c.leader {
		c.followerHandle(&msg)
		return
	}
	// Requests that reached a member that does not lead.
	switch msg.Type {
	case MsgRequest:
		// The origin took this member for its leader: it may have led
		// that epoch and proposed an earlier copy of this request, so
		// the outcome is unknown, not "nothing proposed".
		c.send(from, Message{Type: MsgRequestFail, ReqID: msg.ReqID, Err: ErrLeaderChanged.Error()})
	case MsgReadIndex:
		c.send(from, Message{Type: MsgReadIndexResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
	case MsgCall:
		c.send(from, Message{Type: MsgCallResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
	}
}

// Tick advances logical time by one heartbeat interval.
func (c *Core) Tick() {
	c.now++
	if c.role == RoleRemoved {
		return
	}
	c.transferTick()
	for _, n := range slices.Sorted(maps.Keys(c.rpcs)) {
		if w := c.rpcs[n]; c.now > w.expires {
			c.answer(Answer{ID: w.id, Err: ErrNoLeader})
			delete(c.rpcs, n)
		}
	}
	switch {
	case c.ls != nil:
		c.leaderTick()
		c.checkTransfer()
		if c.ls != nil { // the tick may have ended the leadership
			c.peersTick = true
		}
	case c.fs != nil:
		c.followerTick()
	default:
		c.el.tick(c)
	}
}

// Propose takes a local proposal: a leader appends it, a follower forwards
// it to its leader, anyone else refuses it (Ready.Refused).
func (c *Core) Propose(p Proposal) {
	leading := c.ls != nil && c.ls.phase == lBroadcast
	if p.LeaderEpoch != 0 && (!leading || c.ls.epoch != p.LeaderEpoch) {
		c.refuse(p.ReqID, ErrLeaderChanged)
		return
	}
	refusal := c.transferRefusal()
	switch {
	case leading && refusal != nil:
		c.refuse(p.ReqID, refusal)
	case leading:
		if !c.leaderAppend(c.id, p.ReqID, EntryData, p.Data, p.Time) {
			c.refuse(p.ReqID, ErrNoLeader)
		}
	case c.fs != nil && c.fs.phase == fBroadcast:
		c.send(c.leader, Message{Type: MsgRequest, Epoch: c.fs.epoch, Origin: c.id, ReqID: p.ReqID, Data: p.Data})
	default:
		c.refuse(p.ReqID, ErrNoLeader)
	}
}

// MembershipChange asks the leader to replace the active configuration
// with Voters and Observers. It commits, and takes effect, once a quorum
// of the active configuration and a quorum of the new one hold it; its
// proposer is answered when the entry is applied, like any proposal's.
type MembershipChange struct {
	ReqID             uint64 // as Proposal.ReqID
	Voters, Observers []uint64
	// Addrs is every member's peer address: each voter and observer
	// needs one.
	Addrs map[uint64]string
	// Meta is per-member data zab carries for the server (see
	// Membership.Meta).
	Meta map[uint64][]byte
	// Version is the version of the configuration the change replaces; a
	// change made against another one is refused (ErrStaleMembership).
	Version uint64
	Time    int64 // as Proposal.Time
}

// ProposeMembership takes a local membership change. Only a leader in
// broadcast with no change pending appends it; anything else is refused
// (Ready.Refused), nothing proposed: ErrNotLeader, ErrChangePending,
// ErrStaleMembership, ErrNotCaughtUp (an observer promoted before it is
// synchronized and within MaxDiffEntries of the leader's log),
// ErrPeersTooOld (the first change, while a member it keeps has not
// announced in its FOLLOWERINFO that it reads message version 2), or the
// configuration's own error.
func (c *Core) ProposeMembership(ch MembershipChange) {
	if err := c.checkChange(ch); err != nil {
		c.log.Info("membership change refused", "id", c.id, "err", err)
		c.refuse(ch.ReqID, err)
		return
	}
	m := c.changed(ch)
	if !c.leaderAppend(c.id, ch.ReqID, EntryMembership, EncodeMembership(m), ch.Time) {
		c.refuse(ch.ReqID, ErrNoLeader)
	}
}

func (c *Core) checkChange(ch MembershipChange) error {
	if c.ls == nil || c.ls.phase != lBroadcast {
		return ErrNotLeader
	}
	if err := c.transferRefusal(); err != nil {
		return err
	}
	if c.next != nil {
		return fmt.Errorf("%w (version %s)", ErrChangePending, FormatZxid(c.next.Version))
	}
	if ch.Version != c.conf.Version {
		return fmt.Errorf("%w: asked %s, active %s", ErrStaleMembership, FormatZxid(ch.Version), FormatZxid(c.conf.Version))
	}
	m, err := NewMembership(ch.Voters, ch.Observers)
	if err != nil {
		return err
	}
	for _, id := range m.members() {
		if ch.Addrs[id] == "" {
			return fmt.Errorf("zab: member %d has no peer address", id)
		}
	}
	for _, id := range m.Voters {
		if id == c.id || c.conf.IsVoter(id) || !c.conf.IsMember(id) {
			continue // already votes, or added as a voter directly
		}
		ps := c.ls.peers[id]
		if ps == nil || ps.phase < pUpToDate || c.durable-min(c.durable, ps.acked) > uint64(c.cfg.MaxDiffEntries) {
			return fmt.Errorf("%w: member %d", ErrNotCaughtUp, id)
		}
	}
	// The first change puts configurations into the messages (version
	// 2), which a member of an older version cannot read: it would no
	// longer follow, nor even read a notification. So every member the
	// first change keeps must have announced that it reads them (a
	// rolling upgrade finishes first); a member it removes need not. Once
	// a change has committed, an older member could not follow anyway:
	// refusing later changes would not help it.
	if c.conf.Version != 0 {
		return nil
	}
	for _, ids := range [][]uint64{c.conf.Voters, c.conf.Observers} {
		for _, id := range ids {
			if id == c.id || !m.IsMember(id) {
				continue
			}
			if ps := c.ls.peers[id]; ps == nil || !ps.readsV2 {
				return fmt.Errorf("%w: member %d", ErrPeersTooOld, id)
			}
		}
	}
	return nil
}

// changed returns the configuration a checked change proposes: only its
// members' addresses and metadata, and a LastID that never goes back.
func (c *Core) changed(ch MembershipChange) Membership {
	m, _ := NewMembership(ch.Voters, ch.Observers)
	m.LastID = max(m.LastID, c.conf.LastID)
	m.Addrs = make(map[uint64]string)
	for _, id := range m.members() {
		m.Addrs[id] = ch.Addrs[id]
		if v := ch.Meta[id]; len(v) > 0 {
			if m.Meta == nil {
				m.Meta = make(map[uint64][]byte)
			}
			m.Meta[id] = slices.Clone(v)
		}
	}
	return m
}

// ReadIndex asks for a read index for local request id; Ready.Answers
// carries the answer.
func (c *Core) ReadIndex(id uint64) {
	switch {
	case c.ls != nil && c.ls.phase == lBroadcast:
		c.leaderRead(pendingRead{local: true, id: id})
	case c.fs != nil && c.fs.phase == fBroadcast:
		n := c.newNonce()
		c.rpcs[n] = &localRPC{id: id, expires: c.now + 4*c.etTicks}
		c.send(c.leader, Message{Type: MsgReadIndex, Epoch: c.fs.epoch, Nonce: n})
	default:
		c.answer(Answer{ID: id, Err: ErrNoLeader})
	}
}

// Call asks the leader to run its handler on payload for local request
// id; Ready.Answers carries the answer (errRunLocally on the leader).
func (c *Core) Call(id uint64, payload []byte) {
	switch {
	case c.ls != nil && c.ls.phase == lBroadcast:
		c.answer(Answer{ID: id, Err: errRunLocally})
	case c.fs != nil && c.fs.phase == fBroadcast:
		n := c.newNonce()
		c.rpcs[n] = &localRPC{id: id, expires: c.now + 4*c.etTicks}
		c.send(c.leader, Message{Type: MsgCall, Epoch: c.fs.epoch, Nonce: n, Data: payload})
	default:
		c.answer(Answer{ID: id, Err: ErrNoLeader})
	}
}

// LogDurable reports that the log writer has made every entry through
// index durable. A follower acknowledges the newly durable entries at
// once; a leader counts them at the next Ready. Reports at or below what
// is already durable, or above what was handed over, are ignored (they
// can be stale after a Drain or a Sync reshaped the log).
func (c *Core) LogDurable(index uint64) {
	if index <= c.durable || index > c.written {
		return
	}
	c.durable = index
	if fs := c.fs; fs != nil && fs.phase >= fSynced {
		c.send(c.leader, Message{Type: MsgAck, Epoch: fs.epoch, Seq: fs.seq, Index: c.durable})
	}
	c.startAwaitedSyncs()
}

// SnapshotTaken answers a SnapshotRequest.
func (c *Core) SnapshotTaken(s Snapshot) { c.handleSnapResult(&s) }

// Urgent reports whether the output waiting for Ready holds a drain, a
// synchronization or epochs to persist. The driver then takes and carries
// out the Ready before any further input: later inputs may depend on the
// log or the epochs being what that Ready makes them.
func (c *Core) Urgent() bool { return c.urgent }

// peerAckedTicks is how many heartbeat intervals a synchronized peer may
// go unheard and still be listed in Ready.PeerAcked.
const peerAckedTicks = 3

// Ready returns everything the Core asks of its driver since the last
// call, and starts a new record. Committed entries and the entries for the
// writer are decided here: the pending entries are handed over, the
// commit index advanced (leader) and committed durable entries released.
func (c *Core) Ready() Ready {
	// A configuration this member learned committed takes effect first:
	// if it ends the member's role, the role ends as it would on an
	// input, before the entries pending in memory are handed to the
	// writer (a Drain covers only what earlier Readies handed over). A
	// leader that commits a change in this Ready below takes it up in
	// the next one, counting both quorums meanwhile.
	c.activateCommitted()
	if c.fs != nil && c.fs.phase >= fSynced {
		c.joined() // a pending change naming it may have come since the SYNC
	}
	c.checkRemoved()
	if len(c.pending) > 0 {
		if c.ls != nil && c.ls.phase == lBroadcast {
			// Followers write while the leader does.
			msg := Message{Type: MsgProposal, Epoch: c.ls.epoch, Entries: c.pending}
			for _, id := range c.sortedPeers() {
				if c.ls.peers[id].phase >= pSynced {
					c.send(id, msg)
				}
			}
		}
		c.rd.Entries = append(c.rd.Entries, c.pending...)
		c.tail = append(c.tail, c.pending...)
		c.written = c.pending[len(c.pending)-1].Index
		// Not reused: the driver may still be encoding the PROPOSAL.
		c.pending = nil
	}
	if c.ls != nil && c.ls.phase == lBroadcast {
		c.advanceCommit()
	}
	c.dispatch()
	if c.peersTick && c.ls != nil {
		acked := make(map[uint64]uint64, len(c.ls.peers))
		for id, ps := range c.ls.peers {
			// Only members that answered one of the last few
			// heartbeats: a peer that went away stays synchronized
			// until dropped, and the server's reconfiguration check
			// must not count it as connected.
			if ps.phase >= pSynced && c.now <= ps.heard+peerAckedTicks {
				acked[id] = ps.acked
			}
		}
		c.rd.PeerAcked = acked
	}
	c.peersTick = false
	c.rd.Status = c.Status()
	rd := c.rd
	c.rd = Ready{}
	c.urgent = false
	return rd
}

// Status reports the Core's figures.
func (c *Core) Status() CoreStatus {
	st := CoreStatus{
		Role: c.role, LeaderID: c.leader, Epoch: c.ep.Current, AcceptedEpoch: c.ep.Accepted,
		LastZxid: c.lastZxid, LastIndex: c.durable, CommittedIndex: c.commit, LeaderChanges: c.leaderChanges,
	}
	if c.role == RoleLooking {
		st.LeaderID = 0
	}
	return st
}

// ---- outputs ----

func (c *Core) send(to uint64, m Message) {
	c.rd.Messages = append(c.rd.Messages, Outbound{To: to, Msg: m})
}

func (c *Core) refuse(reqID uint64, err error) {
	c.rd.Refused = append(c.rd.Refused, Refusal{ReqID: reqID, Err: err})
}

func (c *Core) answer(a Answer) { c.rd.Answers = append(c.rd.Answers, a) }

func (c *Core) fatal(err error) {
	if c.rd.Fatal == nil {
		c.rd.Fatal = err
	}
}

// persistEpochs asks the driver to persist e before this Ready's messages
// and takes e as the epochs from now on.
func (c *Core) persistEpochs(e Epochs) {
	c.ep = e
	c.rd.Epochs = &e
	c.urgent = true
}

// drainLog asks the driver to make everything handed to the writer durable
// before anything else in this Ready; from here on the Core counts it as
// durable.
func (c *Core) drainLog() {
	if c.durable < c.written {
		c.durable = c.written
		c.rd.Drain = true
		c.urgent = true
	}
}

func (c *Core) setRole(role Role, leader uint64) {
	c.role, c.leader = role, leader
	if role != RoleLooking && leader != 0 {
		seen := [2]uint64{leader, uint64(c.ep.Current)}
		if seen != c.lastLeadership {
			c.lastLeadership = seen
			c.leaderChanges++
		}
	}
	rc := RoleChange{Role: role, LeaderID: leader, Epoch: c.ep.Current}
	if role == RoleLooking {
		rc.LeaderID = 0
	}
	c.rd.RoleChanges = append(c.rd.RoleChanges, rc)
	c.noteTransferRole(role, rc.LeaderID)
	c.log.Info("zab role", "id", c.id, "role", role, "leader", rc.LeaderID, "epoch", c.ep.Current)
}

// ---- the log in memory ----

// dispatch releases committed, durable entries to the applier.
func (c *Core) dispatch() {
	upto := min(c.commit, c.durable)
	if upto <= c.dispatched {
		return
	}
	ents := c.entriesFromTail(c.dispatched+1, upto)
	if len(ents) == 0 {
		return
	}
	for _, e := range ents {
		if e.Kind != EntryMembership || e.Zxid <= c.savedConf {
			continue
		}
		m, err := membershipOf(e)
		if err != nil {
			c.fatal(err)
			return
		}
		if c.joining && !m.IsMember(c.id) {
			continue // see joined
		}
		c.rd.Membership = &m
		c.savedConf = m.Version
	}
	c.rd.Committed = append(c.rd.Committed, ents...)
	c.dispatched = upto
	// Keep a window of applied entries for resending; drop the rest.
	if len(c.tail) > 2*recentEntries {
		keepFrom := c.dispatched - min(c.dispatched, recentEntries)
		if i := c.tailPos(keepFrom); i > 0 {
			c.tail = slices.Clone(c.tail[i:])
		}
	}
}

func (c *Core) tailPos(index uint64) int {
	if len(c.tail) == 0 || index < c.tail[0].Index {
		return 0
	}
	return int(index - c.tail[0].Index)
}

func (c *Core) entriesFromTail(from, to uint64) []Entry {
	if len(c.tail) == 0 || from < c.tail[0].Index || to > c.tail[len(c.tail)-1].Index {
		return nil
	}
	i := int(from - c.tail[0].Index)
	j := int(to - c.tail[0].Index)
	return slices.Clone(c.tail[i : j+1])
}

// durableEntries returns entries [from, to] (at most durable) from memory
// or the log.
func (c *Core) durableEntries(from, to uint64) ([]Entry, error) {
	if from > to {
		return nil, nil
	}
	if ents := c.entriesFromTail(from, to); ents != nil {
		return ents, nil
	}
	return c.rl.Entries(from, to)
}

// zxidAt returns the zxid at index from memory or the log.
func (c *Core) zxidAt(index uint64) (uint64, bool) {
	if len(c.tail) > 0 && index >= c.tail[0].Index && index <= c.tail[len(c.tail)-1].Index {
		return c.tail[index-c.tail[0].Index].Zxid, true
	}
	return c.rl.ZxidAt(index)
}

// randomTicks returns a random wait between one and two election timeouts.
func (c *Core) randomTicks() uint64 { return c.etTicks + c.rng.Uint64N(c.etTicks+1) }

func (c *Core) newNonce() uint64 {
	c.nonceSeq++
	return c.nonceSeq<<16 | c.rng.Uint64N(1<<16)
}

// setMembership takes conf as the active configuration and next as the
// pending one (nil if none).
func (c *Core) setMembership(conf Membership, next *Membership) {
	c.conf, c.next = conf, next
	c.voter = !c.joining && c.isVoter(c.id)
}

// quorum reports whether has holds for a majority of the voters of every
// configuration in play: the active one and the pending one. Every count
// the protocol makes (votes, discovery, epoch and NEWLEADER
// acknowledgements, commits, read confirmations, the leader's liveness)
// goes through it or quorumValue, so that a change entry and whatever
// follows it is safe whichever configuration ends up active.
func (c *Core) quorum(has func(id uint64) bool) bool {
	if !c.conf.hasQuorum(has) {
		return false
	}
	return c.next == nil || c.next.hasQuorum(has)
}

// quorumValue returns the highest value that a majority of every
// configuration in play has reached (see Membership.quorumValue). A
// pending configuration only constrains values from its own entry on: the
// entries before it commit under the active configuration alone.
func (c *Core) quorumValue(value func(id uint64) (uint64, bool)) (uint64, bool) {
	v, ok := c.conf.quorumValue(value)
	if !ok || c.next == nil {
		return v, ok
	}
	nv, nok := c.next.quorumValue(value)
	if !nok {
		nv = 0
	}
	if c.next.Index > 0 {
		nv = max(nv, c.next.Index-1)
	}
	return min(v, nv), true
}

// soleVoter reports whether this member is the only voter of every
// configuration in play: nobody else can change an election's outcome.
func (c *Core) soleVoter() bool {
	sole := func(m *Membership) bool { return len(m.Voters) == 1 && m.Voters[0] == c.id }
	return sole(&c.conf) && (c.next == nil || sole(c.next))
}

// LoneLeader reports whether this member leads, in broadcast, as the only
// voter of every configuration in play: an entry it appends is committed
// as soon as its own log holds it durably, as no other member's ACK
// counts. Its driver may then start applying entries early (see
// DurableWaiter).
func (c *Core) LoneLeader() bool { return c.role == RoleLeader && c.soleVoter() }

// isVoter reports whether id votes in a configuration in play.
func (c *Core) isVoter(id uint64) bool {
	return c.conf.IsVoter(id) || (c.next != nil && c.next.IsVoter(id))
}

// isMember reports whether id votes or observes in a configuration in
// play.
func (c *Core) isMember(id uint64) bool {
	return c.conf.IsMember(id) || (c.next != nil && c.next.IsMember(id))
}

// voterIDs returns the voters of every configuration in play, sorted.
func (c *Core) voterIDs() []uint64 {
	ids := slices.Clone(c.conf.Voters)
	if c.next != nil {
		ids = append(ids, c.next.Voters...)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	return ids
}

// sortedPeers returns the leader's peers in ID order, so that the
// messages of a Ready come out in the same order on every run.
func (c *Core) sortedPeers() []uint64 { return slices.Sorted(maps.Keys(c.ls.peers)) }

// ---- role transitions ----

// leaveRole ends whatever role the member had: every request that cannot
// be answered by this leadership is failed.
func (c *Core) leaveRole() {
	// Whatever the writer holds becomes durable first, so the log, lastZxid
	// and durable agree again before a vote or FOLLOWERINFO names them.
	c.drainLog()
	wasActive := (c.ls != nil && c.ls.phase == lBroadcast) || (c.fs != nil && c.fs.phase == fBroadcast)
	if c.ls != nil {
		c.ls.failReads(c, ErrLeaderChanged)
	}
	c.ls, c.fs = nil, nil
	err := ErrNoLeader
	if wasActive {
		err = ErrLeaderChanged
	}
	if c.started {
		c.rd.FailProposals = err
	}
	for _, n := range slices.Sorted(maps.Keys(c.rpcs)) {
		c.answer(Answer{ID: c.rpcs[n].id, Err: err})
		delete(c.rpcs, n)
	}
	// Entries not yet written belong to the old leadership; drop them
	// (they were never acknowledged).
	if len(c.pending) > 0 {
		c.dropPendingAbove(c.durable)
		c.lastIndex = c.durable
		if z, ok := c.zxidAt(c.durable); ok {
			c.lastZxid = z
		}
		c.pending = nil
	}
}

func (c *Core) becomeLooking(why string) {
	if c.started {
		c.log.Info("zab looking for a leader", "id", c.id, "why", why)
	}
	c.leaveRole()
	c.setRole(RoleLooking, 0)
	// After setRole: a lone voter wins at once, and leads.
	c.el.start(c)
	c.started = true
}

func (c *Core) becomeFollower(leader uint64) {
	c.leaveRole()
	c.fs = &followerState{phase: fDiscover, nonce: c.newNonce(), heard: c.now, deadline: c.now + c.randomTicks()}
	c.leader = leader
	c.send(leader, c.followerInfo())
}

func (c *Core) followerInfo() Message {
	m := Message{Type: MsgFollowerInfo, Flags: FlagReadsV2, Epoch: c.ep.Accepted, Zxid: c.lastZxid, Index: c.durable, Nonce: c.fs.nonce}
	if !c.voter {
		m.Flags |= FlagObserver
	}
	return m
}
