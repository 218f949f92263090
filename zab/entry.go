package zab

import (
	"fmt"
	"io"
)

// Entry is one committed log record.
type Entry struct {
	Index uint64 // dense, 1-based position in the log
	Zxid  uint64 // epoch<<32 | counter
	// Time is the leader's wall clock (unix milliseconds) when it accepted
	// the proposal; apply uses this, never its own clock. It never decreases
	// along the log.
	Time int64
	Data []byte // opaque payload
	// Origin and ReqID name the proposer: the member that accepted the
	// proposal from its client and that member's request number. The
	// member whose ID is Origin answers its waiting proposer when its own
	// applier applies the entry. Both are zero for entries written before
	// replication existed.
	Origin uint64
	ReqID  uint64
	// Kind says what Data is: a state machine payload (EntryData) or a
	// configuration zab itself reads (EntryMembership). The state machine
	// is handed both, in log order.
	Kind EntryKind
}

// EntryKind is what an entry's Data holds.
type EntryKind uint8

const (
	// EntryData is a payload for the state machine, opaque to zab.
	EntryData EntryKind = iota
	// EntryMembership is a whole configuration (see EncodeMembership),
	// which takes effect when the entry commits. Its version is the
	// entry's zxid.
	EntryMembership
	// entryKindEnd is one past the last kind this binary knows; the log
	// and the wire refuse any other (a new kind needs new formats).
	entryKindEnd
)

// Result is what a StateMachine's Apply returned for one entry, which
// Propose and Pending.Wait hand back to its proposer. zab never looks
// inside it: its type belongs to the state machine. It stays an alias of
// any rather than a type parameter because Member, Pending and every
// caller would then carry the parameter for a value only the state
// machine and its proposer interpret.
type Result = any

// StateMachine is applied by the member, from one goroutine, in index order.
// Sync is called from another goroutine, beside Apply and a Snapshotter's
// Restore.
type StateMachine interface {
	// Apply applies committed entries (a contiguous batch) and returns one
	// result per entry (opaque to zab). An error is fatal for the member
	// (it stops). Entries and their Data are not reused by zab afterwards.
	Apply(entries []Entry) ([]Result, error)
	// AppliedIndex is the last index whose effects the state machine holds
	// (read at startup; log replay starts after it).
	AppliedIndex() uint64
	// Sync makes everything applied so far durable and returns the index it
	// covers: at least the last index of every Apply that returned before
	// Sync was called, and never one an Apply has not been handed. The log
	// may be trimmed only at or below an index a Sync returned.
	Sync() (uint64, error)
}

// DurableWaiter is implemented by a StateMachine that can start applying
// entries while their log write is still being flushed. A member that
// leads as the only voter (a single member) hands it its new entries as
// it hands them to the log writer, before the fdatasync, so that the
// state machine's own writes overlap the disk flush. ApplyWhen must call
// durable before making any effect of the entries visible (to readers,
// watchers or the caller's waiters) and must make none visible if durable
// returns an error; its other rules are Apply's. Any other member applies
// only committed entries and never calls it.
type DurableWaiter interface {
	ApplyWhen(entries []Entry, durable func() error) ([]Result, error)
}

// Skipper is implemented by a StateMachine that can hold, after a crash,
// writes above its applied index: a single member applies entries while
// their log write is being flushed, and a power loss can keep the state
// machine's writes and lose the log's. Entries zab then proposes at those
// indexes would not rewrite them all, so a member that is the only voter
// of its configuration and finds the state machine's ceiling above the end
// of its log, after replaying it at start-up, calls SkipTo and starts the
// new log above the ceiling.
type Skipper interface {
	// Ceiling is the highest index the state machine may hold writes for.
	Ceiling() uint64
	// SkipTo declares, durably, that no entries exist between the applied
	// index and index (at least Ceiling); AppliedIndex then reports index.
	SkipTo(index uint64) error
}

// Snapshotter is implemented by a StateMachine that can be copied whole,
// which replication needs to bring a member up to date when the log no
// longer holds what it is missing (SNAP). Both methods are called from the
// applier goroutine, never concurrently with Apply or Sync.
type Snapshotter interface {
	// Snapshot writes a consistent copy of the state to w and returns the
	// applied index the copy reflects.
	Snapshot(w io.Writer) (index uint64, err error)
	// Restore replaces the whole state with a copy written by Snapshot.
	// Afterwards AppliedIndex reports the snapshot's index. zab calls Sync
	// after Restore and before it discards its log, so the restored state
	// must be durable once Sync returns.
	Restore(r io.Reader) error
}

// MakeZxid builds a zxid from an epoch and a counter within that epoch.
func MakeZxid(epoch, counter uint32) uint64 {
	return uint64(epoch)<<32 | uint64(counter)
}

// ZxidEpoch returns the epoch part of a zxid.
func ZxidEpoch(zxid uint64) uint32 { return uint32(zxid >> 32) }

// ZxidCounter returns the counter part of a zxid.
func ZxidCounter(zxid uint64) uint32 { return uint32(zxid) }

// FormatZxid renders a zxid the way ZooKeeper logs do (hex), for messages.
func FormatZxid(zxid uint64) string { return fmt.Sprintf("0x%x", zxid) }
