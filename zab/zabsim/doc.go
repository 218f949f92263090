// Package zabsim is a deterministic simulator for zab.Core: it runs a
// whole ensemble (3 or 5 voters, with or without observers) in one
// goroutine, under a seeded scheduler, and checks the protocol's safety
// invariants after every step and its liveness at the end of each run.
//
// The simulator is the Core's driver, as replica.go is for a real member:
// it carries out every Ready in the order Ready's comment gives (epochs
// persisted before that Ready's messages, a synchronization installed
// durably first, entries handed to a group-commit writer that reports
// LogDurable only after its simulated fsync, committed entries handed to
// an applier). Around it everything is simulated:
//
//   - a network that delays every message (so messages reorder), and in
//     lossy spells drops, duplicates and holds some back; partitions cut
//     links both ways or one way, in flight included;
//   - per member, a disk: the log (durable entries, one group write whose
//     fsync is in flight, entries queued behind it), the epoch file and
//     the membership file (each replaced atomically) and the state
//     machine (a hash chain of the entries applied, synced now and
//     then); a power loss keeps what was
//     durable, a torn prefix of the group in flight, and a prefix of the
//     state machine's unsynced applies; a restart reopens from the disk as
//     zab's Open does;
//   - per member, a clock ticking at its own rate, and a wall clock off by
//     up to a second (it stamps proposals).
//
// A run is a Trace: the seed (delays, losses, latencies, each member's
// core seed), the ensemble, the length of the faulty phase in steps, and
// the external events (proposals, crashes, power cuts, restarts,
// partitions, heals, lossy spells, log trims, and, in a trace with spare
// members, membership changes: a spare added as an observer and started,
// an observer promoted, a member or the leader removed, each proposed by
// the leader of the moment, one at a time). Generate draws the events
// from the seed as the run goes; Replay runs a given trace and reproduces
// the run exactly. Each message's fate and each latency is drawn from the
// seed, the link or member, and the virtual time, so removing an event
// from a trace perturbs little else, and Shrink can reduce a failing trace
// to the few events that matter.
//
// Invariants checked after every step (see checker): at most one
// established leader per epoch; committed entries agree on every member
// (same zxid at the same index) and every member's applied-state hash
// agrees at equal indexes; a new leader's log holds every committed
// entry; no TRUNC or SNAP cuts a committed entry; acceptedEpoch and
// currentEpoch never go back and current never exceeds accepted; a
// member's durable last zxid goes back only by such a cut; a proposal
// commits at most once; Entry.Time never goes back along the committed
// log; a ReadIndex answer covers everything applied anywhere before it
// was asked. Each Ready is also checked against the disk (an ACK names
// only durable entries; FOLLOWERINFO and ACKEPOCH offer the durable log's
// end; ACKEPOCH, LEADERINFO and ACKNEWLEADER follow their persisted
// epochs; committed entries are durable). At the end of a run every fault is
// healed, and within a bounded number of ticks a leader must be
// established and a proposal commit; every proposal its origin
// acknowledged must then be in the leader's log.
//
// Sabotage breaks the driver's side of the contract on purpose (never
// the core), to show the invariants catch a broken rule.
package zabsim
