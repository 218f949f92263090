package server

import (
	"fmt"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/diskspace"
)

// DefaultSpaceReserve is MemberConfig.SpaceReserve's default: two of
// Badger's 32 MiB memtables, one being flushed into a table while the
// next fills, and a 64 MiB value log file.
const DefaultSpaceReserve = 128 << 20

// checkSpace is what zab asks before each log write: the test fault, then
// whether the data directory keeps half its reserve after need more
// bytes. Entries are checked before they are logged because the state
// machine cannot refuse them once committed, and Badger, which writes
// through memory maps of sparse files, would die of a full disk rather
// than return an error. The other half is for the writes that free space
// (see refuseIfFull), which only this check stops. It reads the file
// system every time: it is the last look before entries reach the log,
// once per turn of a single member's protocol loop for the proposals it
// took in that turn and once per group write on every member, and a
// directory that vanished (or a disk filled by another process) within
// the Gauge's interval must not take them.
func (m *Member) checkSpace(need int64) error {
	if err := m.spaceFault(); err != nil {
		return err
	}
	return diskspace.Check(m.cfg.DataDir, m.cfg.SpaceReserve/2, need)
}

// spaceFault is the test fault's answer, nil without one.
func (m *Member) spaceFault() error {
	if f := m.cfg.SpaceFault; f != nil {
		return f()
	}
	return nil
}

// NoSpace returns why this member refuses writes for want of disk, or
// nil: its data directory is below the reserve, read-only or gone. The
// member then lists a NOSPACE alarm naming itself (a local alarm, not in
// the log: a member whose disk is full could not log it, and it clears
// itself once the disk takes writes again) and refuses client writes with
// core.ErrNoSpace; it keeps serving reads.
//
// The reserve, not a retry of failed writes, is what keeps Badger alive:
// when Badger cannot create a memtable it is left without one and ends
// the process at its next write, and a write into a memory-mapped page
// the disk has no block for is a SIGBUS.
func (m *Member) NoSpace() error {
	// Admission asks this for every client write, so it goes through the
	// Gauge, which spares most statfs calls (see diskspace.Gauge).
	err := m.spaceFault()
	if err == nil {
		err = m.disk.Check(m.cfg.SpaceReserve)
	}
	if !diskspace.Unwritable(err) {
		// Any other failure to look (statfs failed otherwise) says nothing.
		err = nil
	}
	if full := err != nil; m.noSpace.Swap(full) != full {
		if full {
			m.log.Warn("NOSPACE: data directory full, read-only or gone; refusing writes, serving reads", "err", err)
		} else {
			m.log.Warn("NOSPACE cleared: the data directory takes writes again")
		}
	}
	return err
}

// localAlarms adds member id's own NOSPACE alarm to the replicated ones
// when full, what its NoSpace returned, says its disk is full.
func localAlarms(replicated []core.Alarm, id uint64, full error) []core.Alarm {
	if full == nil {
		return replicated
	}
	own := core.Alarm{Member: id, Type: core.AlarmNoSpace}
	for _, a := range replicated {
		if a == own {
			return replicated
		}
	}
	return append(replicated, own)
}

// refuseIfFull refuses a client write that would grow the state while
// NoSpace holds (full is what it returned), before anything is proposed,
// so that a write forwarded to the leader is not committed by the others
// while this member cannot apply it. Writes that free space (freesSpace)
// go on until the log's own check, at half the reserve, stops them too.
func refuseIfFull(op *core.Op, full error) error {
	if full == nil || freesSpace(op) {
		return nil
	}
	return fmt.Errorf("%w: %w", core.ErrNoSpace, full)
}

// freesSpace reports whether op can only shrink the state or leaves it
// as it is: deletes, reads, lease revokes, compaction, alarm changes and
// corruption checks, which etcd too lets through under NOSPACE (its
// quota refuses puts, Txns with puts and lease grants).
func freesSpace(op *core.Op) bool {
	switch {
	case op.Txn != nil:
		return txnFreesSpace(op.Txn)
	case op.LeaseGrant != nil:
		return false
	}
	return true
}

func txnFreesSpace(t *core.Txn) bool {
	for _, ops := range [][]core.TxnOp{t.Success, t.Failure} {
		for _, o := range ops {
			switch o.Kind {
			case core.OpRange, core.OpGet, core.OpCheck, core.OpDeleteRange, core.OpDelete:
			case core.OpTxn:
				if o.Txn != nil && !txnFreesSpace(o.Txn) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}
