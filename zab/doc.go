// Package zab is the write pipeline every Janus write goes through: it orders
// proposals, makes them durable in an append-only log, and applies them, in
// order, to a StateMachine. It treats entry payloads as opaque bytes.
//
// Today an ensemble has a single member, which is always the leader and
// commits an entry as soon as its own log holds it. The caller-facing API
// (Open, Propose, Status, Trim, Close) is shaped so that replication adds
// peers behind it without changing callers.
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
// written. The epoch is persisted before any zxid in it is assigned.
//
// The state machine need not make its own writes durable on every Apply:
// on Open, every log entry after StateMachine.AppliedIndex is replayed into
// it. The log is therefore trimmed only at or below an index that
// StateMachine.Sync returned, and never in the active segment.
//
// On Open, a torn or corrupt tail of the last segment (a partial record, or
// a record with a bad checksum that no valid record follows) is what a crash
// mid-write leaves behind; it can hold nothing acknowledged, so it is
// truncated with a warning. Any other damage (a bad record followed by a
// valid one, a bad record in an older segment, a gap in the indexes) makes
// Open fail rather than serve wrong data.
//
// # Identifiers
//
// Index is the dense, 1-based position of an entry in the log. Zxid is
// epoch<<32 | counter, as in ZooKeeper. A single member starts a new epoch
// each time it opens (as a new Zab leader would), so zxids only grow, across
// restarts too, even when every segment has been trimmed. Both index and zxid
// are strictly increasing along the log. Entry.Time is the leader's clock
// when it accepted the proposal, never lower than the previous entry's.
package zab
