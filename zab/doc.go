// Package zab is the write pipeline every Janus write goes through: it orders
// proposals, makes them durable in an append-only log, and applies them, in
// order, to a StateMachine. It treats entry payloads as opaque bytes.
//
// Every member runs Zab: fast leader election, discovery, synchronization
// and broadcast (see election.go, leader.go, follower.go for each phase's
// contract), among Config.Peers (voters) and Config.Observers. A single
// member is the one voter of its ensemble: it elects itself at once and
// commits an entry as soon as its own log holds it, and with a peer
// address it can grow like any ensemble. Callers see the same API either
// way: Propose, ReadIndex + WaitApplied, CallLeader, Status, RoleChanges,
// Trim, Close.
//
// # Core and driver
//
// The protocol is Core (core.go): a state machine with no goroutines,
// clock, I/O or randomness but its seed, driven by inputs (Step, Tick,
// Propose, ProposeMembership, ReadIndex, Call, LogDurable, SnapshotTaken)
// and answering with a Ready record that says what to persist, install,
// write, apply and send, in an order its doc comment fixes. Every rule of the replication
// contract below is carried by that record, so a driver that carries
// Readies out in order keeps it. replica.go is the driver of a real
// member (log files, log writer, applier, epoch file, transport, ticker,
// waiting callers); a simulator can drive many Cores in one goroutine, and
// the scripts in testdata/core drive them step by step.
//
// # Replication contract
//
//   - ZXID = epoch<<32 | counter. acceptedEpoch and currentEpoch live in
//     the epoch file, replaced atomically; neither ever goes back.
//   - acceptedEpoch is persisted before ACKEPOCH is sent (and by a leader
//     before LEADERINFO). A follower persists currentEpoch only after the
//     entries of its synchronization are fdatasync'ed and the committed
//     ones handed to the applier, and acknowledges NEWLEADER only after
//     that (the order ZOOKEEPER-3911, 4394, 4643 and 4646 settled on).
//   - A leader proposes in its epoch only after a quorum acknowledged
//     NEWLEADER; its whole log is then committed.
//   - An ACK names only entries on the follower's disk; the leader counts
//     itself only after its own fdatasync. An entry commits when a quorum
//     of voters has it on disk; every member applies committed entries in
//     index order, and only those: a restarted member applies nothing
//     beyond its state machine until a leader says what is committed.
//   - A proposal made on any member carries (Origin, ReqID); the origin
//     answers its proposer when its own applier applies the entry, so the
//     proposer then reads its own write there. If the leadership ends
//     before that, the proposer gets ErrLeaderChanged (outcome unknown);
//     while no leader is known, ErrNoLeader (nothing proposed).
//   - Messages may be lost, duplicated or reordered: each names its epoch
//     and synchronization session, stale ones are ignored, entries a
//     follower already has are skipped, a leader never proposes one
//     forwarded request twice, and what is lost is resent on the tick.
//
// # Durability contract
//
// A proposal is acknowledged (Propose returns its result) only after
//
//  1. its log record has been written and fdatasync'ed to the segment file
//     that holds it, together with every record before it, and
//  2. the state machine has applied it and every entry before it.
//
// The log is written by one goroutine that gathers every pending proposal
// into a group, writes the group, and issues one fdatasync for the whole
// group (group commit); the group is then handed to a separate applier
// goroutine, so the next group is written while the previous one applies.
//
// A new segment file, and the epoch file, are made durable (file fsync,
// rename, directory fsync) before anything that depends on them is
// written. The epoch is persisted before any zxid in it is assigned. A
// segment file is preallocated to the segment size before that fsync, so
// the group commits that write into it never grow it and their
// fdatasyncs have no size change to commit; the zeros after its last
// record are where the log ends.
//
// The state machine need not make its own writes durable on every Apply:
// on Open, every log entry after StateMachine.AppliedIndex is replayed into
// it. The log is therefore trimmed only at or below an index that
// StateMachine.Sync returned, and never in the active segment.
//
// On Open, damage that can only be the last group write, torn by a crash
// or a power loss (zeros, garbage or a partial record after the last whole
// one, possibly followed by records of that same group whose pages reached
// the disk first), holds nothing acknowledged and is truncated with a
// warning: at most one group write is ever unsynced, and each record says
// which group write it belongs to. Zeros alone after a segment's last
// record are its unused preallocated space, not damage. Damage that the
// disk proves acknowledged makes Open fail, naming the segment and the
// offset, rather than serve wrong data: damage followed by a record of a
// later group write, any damage in an older segment, a gap in the indexes
// (see scanSegment for the whole rule).
//
// # Identifiers
//
// Index is the dense, 1-based position of an entry in the log; it is the
// same on every member. Zxid is epoch<<32 | counter, as in ZooKeeper. A
// single member starts a new epoch each time it opens (it is elected
// again, as the leader of any ensemble is), so zxids only grow, across restarts too, even when every segment
// has been trimmed. Both index and zxid
// are strictly increasing along the log. Entry.Time is the leader's clock
// when it accepted the proposal, never lower than the previous entry's.
package zab
