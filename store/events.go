package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

// The event log keeps, per revision, only what cannot be read back from the
// versioned records: each event's type, implicit flag and key. Replay
// rebuilds an event's nodes by the same rules core.Apply follows:
//
//   - a put's Node is the key's record at the revision (read at the index
//     that created it);
//   - a delete's Node is just the key and the deleting revision;
//   - an implicit put's Node is the implicit parent that appeared at the
//     revision, at the entry's time; its Prev is nil;
//   - the Prev of the first event on a key is the key's record just before
//     the entry (read one timestamp below its index), the Prev of a later
//     event on the same key is the Node of the event before it.
//
// When an event does not follow the rules (an implicit delete's Prev, a key
// written twice in one revision, an ACL change before a put in the same
// transaction), the record carries the node itself. Apply checks every event
// against what replay would rebuild, so replay is exact by construction.

const eventFormatV1 = 1

// Event flags.
const (
	evDelete      = 1 << 0
	evImplicit    = 1 << 1
	evNodeInline  = 1 << 2
	evPrevInline  = 1 << 3
	evWasImplicit = 1 << 4
)

// Inline node flags.
const (
	inPresent  = 1 << 0
	inImplicit = 1 << 1
	inNilValue = 1 << 2
)

// RevEvents is the events of one revision, in the order Apply produced them.
type RevEvents struct {
	Rev    int64
	Events []core.Event
	// Origin is the face whose op made the revision.
	Origin core.Origin
}

// eventRecorder builds the event record of one entry, checking each event
// against the replay rules.
type eventRecorder struct {
	// before returns the node at key just before the entry and its stored
	// encoding (nil, nil if absent).
	before func(key []byte) (*core.Node, []byte, error)
	// after returns the node the entry leaves at key and its stored
	// encoding (nil, nil if it deletes the key or does not write it).
	after func(key []byte) (*core.Node, []byte)
}

func (r *eventRecorder) record(b *core.Batch) ([]byte, error) {
	size := 1 + 3*binary.MaxVarintLen64 + 1 // + the origin
	for i := range b.Events {
		size += 1 + binary.MaxVarintLen32 + len(eventKeyOf(&b.Events[i]))
	}
	out := make([]byte, 0, size)
	out = append(out, eventFormatV1)
	out = binary.AppendUvarint(out, b.Index)
	out = binary.AppendVarint(out, b.Time)
	out = binary.AppendUvarint(out, uint64(len(b.Events)))
	// chain holds the node each key's last event left, once a second event
	// may need it.
	var chain map[string]*core.Node
	if len(b.Events) > 1 {
		chain = map[string]*core.Node{}
	}
	for i := range b.Events {
		ev := &b.Events[i]
		key := eventKeyOf(ev)
		if key == nil {
			return nil, fmt.Errorf("store: event %d of entry %d has no key", i, b.Index)
		}
		var flags byte
		if ev.Type == core.EventDelete {
			flags |= evDelete
		}
		if ev.WasImplicit {
			flags |= evWasImplicit
		}
		nodeOK, prevOK := false, false
		if ev.Implicit {
			flags |= evImplicit
			if ev.Type == core.EventPut {
				nodeOK = sameNode(ev.Node, implicitAt(key, b.Rev, b.Time))
			} else {
				nodeOK = sameNode(ev.Node, deletedAt(key, b.Rev))
			}
			prevOK = ev.Prev == nil
		} else {
			if ev.Type == core.EventPut {
				n, enc := r.after(key)
				nodeOK = matchesStored(ev.Node, n, enc)
			} else {
				nodeOK = sameNode(ev.Node, deletedAt(key, b.Rev))
			}
			if prev, seen := chain[string(key)]; seen {
				prevOK = sameNode(ev.Prev, prev)
			} else {
				n, stored, err := r.before(key)
				if err != nil {
					return nil, err
				}
				prevOK = (ev.Prev == nil && stored == nil) || matchesStored(ev.Prev, n, stored)
			}
			if chain != nil {
				if ev.Type == core.EventPut {
					chain[string(key)] = ev.Node
				} else {
					chain[string(key)] = nil
				}
			}
		}
		if !nodeOK {
			flags |= evNodeInline
		}
		if !prevOK {
			flags |= evPrevInline
		}
		out = append(out, flags)
		out = binary.AppendUvarint(out, uint64(len(key)))
		out = append(out, key...)
		if !nodeOK {
			out = appendInline(out, ev.Node)
		}
		if !prevOK {
			out = appendInline(out, ev.Prev)
		}
	}
	// The origin trails the events, only when known, so records written
	// before origins were kept read as they did (OriginUnknown).
	if b.Origin != core.OriginUnknown {
		out = append(out, byte(b.Origin))
	}
	return out, nil
}

func eventKeyOf(ev *core.Event) []byte {
	switch {
	case ev.Node != nil:
		return ev.Node.Key
	case ev.Prev != nil:
		return ev.Prev.Key
	}
	return nil
}

func implicitAt(key []byte, rev, time int64) *core.Node {
	return &core.Node{Key: key, CreateRev: rev, ModRev: rev, Ctime: time, Mtime: time, Implicit: true}
}

func deletedAt(key []byte, rev int64) *core.Node {
	return &core.Node{Key: key, ModRev: rev}
}

// sameNode reports whether a and b are identical, down to nil versus empty.
func sameNode(a, b *core.Node) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Implicit == b.Implicit && bytes.Equal(a.Key, b.Key) &&
		(a.Value == nil) == (b.Value == nil) &&
		bytes.Equal(core.AppendNode(nil, a), core.AppendNode(nil, b))
}

// matchesStored reports whether decoding the stored record gives exactly n.
// Decoding never yields an implicit node nor a nil value, so such nodes
// never match. storedNode is the node stored was encoded from or decoded
// to, if known: when n is that very node, as it nearly always is, the
// encodings are equal without encoding n again.
func matchesStored(n, storedNode *core.Node, stored []byte) bool {
	if n == nil || stored == nil || n.Implicit || n.Value == nil {
		return false
	}
	return n == storedNode || bytes.Equal(core.AppendNode(nil, n), stored)
}

func appendInline(b []byte, n *core.Node) []byte {
	if n == nil {
		return append(b, 0)
	}
	flags := byte(inPresent)
	if n.Implicit {
		flags |= inImplicit
	}
	if n.Value == nil {
		flags |= inNilValue
	}
	b = append(b, flags)
	enc := core.AppendNode(nil, n)
	b = binary.AppendUvarint(b, uint64(len(enc)))
	return append(b, enc...)
}

var errCorruptEvents = errors.New("store: corrupt event record")

type eventDecoder struct {
	b   []byte
	err error
}

func (d *eventDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorruptEvents
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *eventDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorruptEvents
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *eventDecoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errCorruptEvents
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *eventDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errCorruptEvents
		return nil
	}
	v := bytes.Clone(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *eventDecoder) inline(key []byte) *core.Node {
	flags := d.byte()
	if d.err != nil || flags&inPresent == 0 {
		return nil
	}
	enc := d.bytes()
	if d.err != nil {
		return nil
	}
	n, err := core.DecodeNode(bytes.Clone(key), enc)
	if err != nil {
		d.err = err
		return nil
	}
	n.Implicit = flags&inImplicit != 0
	if flags&inNilValue != 0 {
		n.Value = nil
	}
	return n
}

// eventIndex returns the index of the entry an event record belongs to.
func eventIndex(rec []byte) (uint64, error) {
	d := &eventDecoder{b: rec}
	if v := d.byte(); v != eventFormatV1 && d.err == nil {
		return 0, fmt.Errorf("unknown event record format %d", v)
	}
	idx := d.uvarint()
	return idx, d.err
}

// replayRevision rebuilds the events of revision rev from its record.
// nodeAt reads a stored node at a timestamp.
func replayRevision(rev int64, rec []byte, nodeAt func(ts uint64, key []byte) (*core.Node, error)) (RevEvents, error) {
	d := &eventDecoder{b: rec}
	if v := d.byte(); v != eventFormatV1 && d.err == nil {
		return RevEvents{}, fmt.Errorf("store: unknown event record format %d at revision %d", v, rev)
	}
	index := d.uvarint()
	time := d.varint()
	count := d.uvarint()
	if d.err != nil || count > uint64(len(d.b)) {
		return RevEvents{}, fmt.Errorf("store: event record of revision %d: %w", rev, errCorruptEvents)
	}
	out := RevEvents{Rev: rev}
	if count > 0 {
		out.Events = make([]core.Event, 0, count)
	}
	chain := map[string]*core.Node{}
	for i := uint64(0); i < count; i++ {
		flags := d.byte()
		key := d.bytes()
		if d.err != nil {
			break
		}
		ev := core.Event{Type: core.EventPut, Implicit: flags&evImplicit != 0, WasImplicit: flags&evWasImplicit != 0}
		if flags&evDelete != 0 {
			ev.Type = core.EventDelete
		}
		var err error
		switch {
		case flags&evNodeInline != 0:
			ev.Node = d.inline(key)
		case ev.Type == core.EventDelete:
			ev.Node = deletedAt(bytes.Clone(key), rev)
		case ev.Implicit:
			ev.Node = implicitAt(bytes.Clone(key), rev, time)
		default:
			ev.Node, err = nodeAt(index, key)
		}
		if err != nil {
			return RevEvents{}, err
		}
		prev, seen := chain[string(key)]
		switch {
		case flags&evPrevInline != 0:
			ev.Prev = d.inline(key)
		case ev.Implicit:
		case seen:
			ev.Prev = prev.Clone()
		case index > 0:
			ev.Prev, err = nodeAt(index-1, key)
		}
		if err != nil {
			return RevEvents{}, err
		}
		if d.err != nil {
			break
		}
		if !ev.Implicit {
			if ev.Type == core.EventPut {
				chain[string(key)] = ev.Node
			} else {
				chain[string(key)] = nil
			}
		}
		out.Events = append(out.Events, ev)
	}
	if d.err == nil && len(d.b) > 0 {
		out.Origin = core.Origin(d.byte())
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorruptEvents
	}
	if d.err != nil {
		return RevEvents{}, fmt.Errorf("store: event record of revision %d: %w", rev, d.err)
	}
	return out, nil
}

// Events returns the events of every revision in [from, to] (to <= 0 or past
// the current revision means up to the current one), with Node and Prev as
// core.Apply produced them. A from below the compact revision gives
// core.ErrCompacted.
func (s *Store) Events(from, to int64) ([]RevEvents, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	st := s.state.Load()
	if to <= 0 || to > st.rev {
		to = st.rev
	}
	from = max(from, 1)
	pin, err := s.hist.pin(from, true)
	if err != nil {
		return nil, err
	}
	defer s.hist.unpin(pin)
	if from > to {
		return nil, nil
	}
	r := reader{txn: s.db.NewTransactionAt(st.applied, false)}
	defer r.txn.Discard()
	// One transaction per timestamp read; a revision reads at two.
	txns := map[uint64]reader{}
	defer func() {
		for _, t := range txns {
			t.txn.Discard()
		}
	}()
	nodeAt := func(ts uint64, key []byte) (*core.Node, error) {
		t, ok := txns[ts]
		if !ok {
			t = reader{txn: s.db.NewTransactionAt(ts, false)}
			txns[ts] = t
		}
		return t.Node(key)
	}
	var out []RevEvents
	prefix := []byte{prefixEventLog}
	err = r.scan(prefix, eventKey(from), eventKey(to+1), func(k []byte, item *badger.Item) (bool, error) {
		rev := int64(getUint64(k))
		var re RevEvents
		err := item.Value(func(v []byte) error {
			var err error
			re, err = replayRevision(rev, v, nodeAt)
			return err
		})
		if err != nil {
			return false, err
		}
		out = append(out, re)
		// Transactions of finished revisions are not read again.
		for ts, t := range txns {
			t.txn.Discard()
			delete(txns, ts)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
