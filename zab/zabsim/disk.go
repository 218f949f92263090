package zabsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/januskv/janus/zab"
)

// disk is one member's simulated storage: the epoch file, the log and the
// state machine. It outlives the member's incarnations: a crash keeps what
// was durable (and, of the one group write in flight, a torn prefix), and a
// restart reopens from it.
type disk struct {
	accepted, current uint32 // the epoch file, replaced atomically
	// membership is the membership file (the last committed
	// configuration), replaced atomically; nil until one is persisted.
	membership *zab.Membership

	// The log is base, then log (durable), then group (written, its fsync
	// in flight: at most one group write is ever unsynced), then queued
	// (handed to the writer, waiting for the next group).
	base   logBase
	log    []zab.Entry
	group  []zab.Entry
	queued []zab.Entry

	sm stateMachine
}

// logBase is where the log starts: the entry at index is in the state
// machine or trimmed; zxid is known unless the log was reset at a state
// that came from elsewhere.
type logBase struct {
	index, zxid uint64
}

// stateMachine is a replica's applied state: a hash chain over the
// entries it applied, which equals on two members exactly when they
// applied the same entries in the same order.
type stateMachine struct {
	index uint64
	hash  uint64
	// synced is the state last made durable; since holds each state
	// reached after it, so a crash can keep any prefix of them (as a store
	// that flushes in the background may).
	synced smPoint
	since  []smPoint
}

type smPoint struct{ index, hash uint64 }

func chainHash(prev uint64, e *zab.Entry) uint64 {
	h := fnv.New64a()
	var b [8 * 3]byte
	binary.LittleEndian.PutUint64(b[0:], prev)
	binary.LittleEndian.PutUint64(b[8:], e.Index)
	binary.LittleEndian.PutUint64(b[16:], e.Zxid)
	h.Write(b[:])
	h.Write(e.Data)
	return h.Sum64()
}

func (s *stateMachine) apply(e *zab.Entry) error {
	if e.Index != s.index+1 {
		return fmt.Errorf("apply index %d after applied index %d", e.Index, s.index)
	}
	s.index, s.hash = e.Index, chainHash(s.hash, e)
	s.since = append(s.since, smPoint{s.index, s.hash})
	return nil
}

func (s *stateMachine) sync() {
	s.synced = smPoint{s.index, s.hash}
	s.since = nil
}

// snapshot encodes the state; restore installs one durably.
func (s *stateMachine) snapshot() []byte {
	return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, s.index), s.hash)
}

func (s *stateMachine) restore(b []byte) error {
	if len(b) != 16 {
		return errors.New("not a snapshot")
	}
	s.index, s.hash = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	s.sync()
	return nil
}

// lastIndex is the index of the last entry written (durable or not).
func (d *disk) lastIndex() uint64 {
	return d.base.index + uint64(len(d.log)+len(d.group)+len(d.queued))
}

// durableIndex is the index of the last fsync'ed entry.
func (d *disk) durableIndex() uint64 { return d.base.index + uint64(len(d.log)) }

// entry returns the written entry at index.
func (d *disk) entry(index uint64) (*zab.Entry, bool) {
	if index <= d.base.index {
		return nil, false
	}
	i := int(index - d.base.index - 1)
	for _, part := range [][]zab.Entry{d.log, d.group, d.queued} {
		if i < len(part) {
			return &part[i], true
		}
		i -= len(part)
	}
	return nil, false
}

// durableZxid returns the zxid of the last durable entry (or the base).
func (d *disk) durableZxid() uint64 {
	if len(d.log) > 0 {
		return d.log[len(d.log)-1].Zxid
	}
	return d.base.zxid
}

// write hands entries to the writer.
func (d *disk) write(ents []zab.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	if ents[0].Index != d.lastIndex()+1 {
		return fmt.Errorf("write entries from index %d after last index %d", ents[0].Index, d.lastIndex())
	}
	d.queued = append(d.queued, copyEntries(ents)...)
	return nil
}

// startGroup moves what is queued into the group write; it reports false
// if there is nothing to write or a group is already in flight.
func (d *disk) startGroup() bool {
	if len(d.group) > 0 || len(d.queued) == 0 {
		return false
	}
	d.group, d.queued = d.queued, nil
	return true
}

// syncGroup completes the group write's fsync and returns the new durable
// index.
func (d *disk) syncGroup() uint64 {
	d.log = append(d.log, d.group...)
	d.group = nil
	return d.durableIndex()
}

// drain makes everything handed to the writer durable.
func (d *disk) drain() uint64 {
	d.log = append(d.log, d.group...)
	d.log = append(d.log, d.queued...)
	d.group, d.queued = nil, nil
	return d.durableIndex()
}

// truncateAfter cuts the log after index, durably. Nothing may be in the
// writer's hands.
func (d *disk) truncateAfter(index uint64) error {
	if len(d.group)+len(d.queued) > 0 {
		return errors.New("truncate while the writer holds entries")
	}
	if index < d.base.index {
		return fmt.Errorf("truncate after index %d below the log's base %d", index, d.base.index)
	}
	if index < d.durableIndex() {
		d.log = d.log[:index-d.base.index]
	}
	return nil
}

// resetAt restarts the log empty at base, durably.
func (d *disk) resetAt(b logBase) {
	d.base = b
	d.log, d.group, d.queued = nil, nil, nil
}

// trimThrough forgets durable entries up to index (at most the state
// machine's synced index).
func (d *disk) trimThrough(index uint64) {
	index = min(index, d.sm.synced.index, d.durableIndex())
	if index <= d.base.index {
		return
	}
	e, _ := d.entry(index)
	n := index - d.base.index
	d.base = logBase{index: index, zxid: e.Zxid}
	d.log = append([]zab.Entry(nil), d.log[n:]...)
}

// crash keeps what a power loss keeps: every durable entry, keepPct
// percent of the group in flight (a torn write keeps a prefix of whole
// records), none of what was queued, and of the state machine's states
// since it last synced a prefix of the same share.
func (d *disk) crash(keepPct int) (tornKept int) {
	tornKept = len(d.group) * keepPct / 100
	d.log = append(d.log, d.group[:tornKept]...)
	d.group, d.queued = nil, nil
	keep := len(d.sm.since) * keepPct / 100
	p := d.sm.synced
	if keep > 0 {
		p = d.sm.since[keep-1]
	}
	d.sm.index, d.sm.hash = p.index, p.hash
	d.sm.sync()
	return tornKept
}

// zxidAt returns the zxid at index among the written entries and the base.
func (d *disk) zxidAt(index uint64) (uint64, bool) {
	if index == d.base.index {
		return d.base.zxid, index == 0 || d.base.zxid != 0
	}
	if e, ok := d.entry(index); ok {
		return e.Zxid, true
	}
	return 0, false
}

// indexAtOrBelow returns the highest index whose zxid is at most zxid
// among the written entries and the base; ok is false when even the base
// is above it (or unknown).
func (d *disk) indexAtOrBelow(zxid uint64) (uint64, bool) {
	var index uint64
	ok := false
	if (d.base.index == 0 || d.base.zxid != 0) && d.base.zxid <= zxid {
		index, ok = d.base.index, true
	}
	for _, part := range [][]zab.Entry{d.log, d.group, d.queued} {
		for i := range part {
			if part[i].Zxid > zxid {
				return index, ok
			}
			index, ok = part[i].Index, true
		}
	}
	return index, ok
}

// entries returns copies of the written entries [from, to].
func (d *disk) entries(from, to uint64) ([]zab.Entry, error) {
	if from > to {
		return nil, nil
	}
	if from <= d.base.index {
		return nil, fmt.Errorf("entries from %d: trimmed (the log starts after %d)", from, d.base.index)
	}
	if to > d.lastIndex() {
		return nil, fmt.Errorf("entries to %d: the log ends at %d", to, d.lastIndex())
	}
	out := make([]zab.Entry, 0, to-from+1)
	for i := from; i <= to; i++ {
		e, _ := d.entry(i)
		out = append(out, *e)
	}
	return copyEntries(out), nil
}
