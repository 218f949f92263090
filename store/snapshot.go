package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

// A snapshot is the latest state as a stream of Badger records, each with
// the version it was written at:
//
//	magic(8) uvarint(applied index)
//	{ 0x01 uvarint(len) key uvarint(version) uvarint(len) value }*
//	0x00 uvarint(record count) crc32c(4, big-endian, of all bytes before it)
//
// History is not included: the revision index and the event log stay
// behind, and so do old versions. A restored store therefore serves reads
// from the snapshot's revision on and events from the one after it.

var snapshotMagic = [8]byte{'j', 'a', 'n', 'u', 's', 's', 'n', '1'}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// WriteSnapshot streams a consistent copy of the latest state to w and
// returns the applied index it is a copy of.
func (s *Store) WriteSnapshot(w io.Writer) (uint64, error) {
	v, err := s.Latest()
	if err != nil {
		return 0, err
	}
	defer v.Close()
	return v.WriteSnapshot(w)
}

// WriteSnapshot streams the state the View shows to w and returns the
// applied index it is a copy of, so that a caller can write other forms
// of the same state (an etcd backend file) from the same View.
func (v *View) WriteSnapshot(w io.Writer) (uint64, error) {
	// The view's timestamp is the applied index it shows.
	applied := v.txn.ReadTs()
	sw, err := newSnapWriter(w, applied)
	if err != nil {
		return 0, err
	}
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	it := v.txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		key := item.Key()
		if !inSnapshot(key) {
			continue
		}
		err := item.Value(func(val []byte) error { return sw.record(key, item.Version(), val) })
		if err != nil {
			return 0, fmt.Errorf("store: write snapshot record %q: %w", key, err)
		}
	}
	return applied, sw.finish()
}

// WriteStateSnapshot writes, in the snapshot format, a whole state that
// did not come from a store: state holds every record of it as writes
// (nothing deleted, Meta set), and all of them are written at index
// applied. It is how a state read from another system (an etcd backend
// file, a ZooKeeper data directory) becomes something RestoreSnapshot
// loads, with the same checks as any snapshot.
func WriteStateSnapshot(w io.Writer, applied uint64, state *core.Batch) error {
	if applied == 0 || state.Meta == nil {
		return errors.New("store: a state snapshot needs an index and meta")
	}
	sw, err := newSnapWriter(w, applied)
	if err != nil {
		return err
	}
	var recs []snapRecord
	for _, n := range state.Nodes {
		if n.Node == nil {
			return fmt.Errorf("store: state snapshot deletes node %q", n.Key)
		}
		recs = append(recs, snapRecord{nodeKey(n.Key), core.AppendNode(nil, n.Node)})
	}
	for _, d := range state.Dirs {
		if d.Dir == nil {
			return fmt.Errorf("store: state snapshot deletes dir %q", d.Path)
		}
		recs = append(recs, snapRecord{dirKey(d.Path), core.AppendDir(nil, d.Dir)})
	}
	for _, c := range state.Children {
		recs = append(recs, snapRecord{childKey(c.Parent, c.Name), nil})
	}
	for _, l := range state.Leases {
		if l.Lease == nil {
			return fmt.Errorf("store: state snapshot deletes lease %d", l.ID)
		}
		recs = append(recs, snapRecord{leaseKey(l.ID), core.AppendLease(nil, l.Lease)})
	}
	for _, lk := range state.LeaseKeys {
		recs = append(recs, snapRecord{leaseAttachKey(lk.ID, lk.Key), nil})
	}
	recs = append(recs, snapRecord{metaKey(metaCore), core.AppendMeta(nil, *state.Meta)})
	// Badger's iteration order, as a store's own snapshot has it.
	slices.SortFunc(recs, func(a, b snapRecord) int { return bytes.Compare(a.key, b.key) })
	for i, r := range recs {
		if i > 0 && bytes.Equal(recs[i-1].key, r.key) {
			return fmt.Errorf("store: state snapshot writes record %q twice", r.key)
		}
		if err := sw.record(r.key, applied, r.val); err != nil {
			return fmt.Errorf("store: write snapshot record %q: %w", r.key, err)
		}
	}
	return sw.finish()
}

type snapRecord struct{ key, val []byte }

// snapWriter writes the snapshot format: the header on creation, one
// record per call, the count and checksum on finish.
type snapWriter struct {
	w     io.Writer
	bw    *bufio.Writer
	crc   hash.Hash32
	num   []byte
	count uint64
}

func newSnapWriter(w io.Writer, applied uint64) (*snapWriter, error) {
	crc := crc32.New(crcTable)
	sw := &snapWriter{w: w, crc: crc, bw: bufio.NewWriterSize(io.MultiWriter(w, crc), 256<<10)}
	if err := sw.put(snapshotMagic[:]); err != nil {
		return nil, fmt.Errorf("store: write snapshot: %w", err)
	}
	if err := sw.put(sw.uv(applied)); err != nil {
		return nil, fmt.Errorf("store: write snapshot: %w", err)
	}
	return sw, nil
}

func (sw *snapWriter) put(b ...[]byte) error {
	for _, p := range b {
		if _, err := sw.bw.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func (sw *snapWriter) uv(x uint64) []byte {
	sw.num = binary.AppendUvarint(sw.num[:0], x)
	return sw.num
}

func (sw *snapWriter) record(key []byte, version uint64, val []byte) error {
	if err := sw.put([]byte{1}, sw.uv(uint64(len(key))), key); err != nil {
		return err
	}
	if err := sw.put(sw.uv(version)); err != nil {
		return err
	}
	if err := sw.put(sw.uv(uint64(len(val))), val); err != nil {
		return err
	}
	sw.count++
	return nil
}

func (sw *snapWriter) finish() error {
	if err := sw.put([]byte{0}, sw.uv(sw.count)); err != nil {
		return fmt.Errorf("store: write snapshot: %w", err)
	}
	if err := sw.bw.Flush(); err != nil {
		return fmt.Errorf("store: write snapshot: %w", err)
	}
	if _, err := sw.w.Write(binary.BigEndian.AppendUint32(nil, sw.crc.Sum32())); err != nil {
		return fmt.Errorf("store: write snapshot checksum: %w", err)
	}
	return nil
}

// inSnapshot says whether a record belongs in a snapshot: state yes; history
// and the store's own bookkeeping no.
func inSnapshot(key []byte) bool {
	switch key[0] {
	case prefixRevIndex, prefixEventLog:
		return false
	case prefixMeta:
		name := string(key[1:])
		return name != metaApplied && name != metaRestored && name != metaReclaim && !strings.HasPrefix(name, metaFill)
	}
	return true
}

var errNotEmpty = errors.New("store: restore needs an empty store")

// RestoreSnapshot loads a snapshot written by WriteSnapshot into an empty
// store. On error the store is wiped back to empty. Nothing may read the
// store while it restores (Badger's wipe does not tolerate readers).
func (s *Store) RestoreSnapshot(r io.Reader) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if empty, err := s.isEmpty(); err != nil {
		return err
	} else if !empty {
		return errNotEmpty
	}
	applied, err := s.restore(r)
	if err != nil {
		if derr := s.db.DropAll(); derr != nil {
			return fmt.Errorf("store: restore failed (%w) and wiping it failed too: %v", err, derr)
		}
		return err
	}
	// A restored store has no log below its index to go back to: it is
	// made durable before it counts as applied.
	if err := s.syncLocked(applied); err != nil {
		return err
	}
	if err := s.load(); err != nil {
		return err
	}
	s.log.Info("store restored from snapshot", "applied", applied, "rev", s.Rev())
	return nil
}

func (s *Store) isEmpty() (bool, error) {
	if s.state.Load().applied != 0 {
		return false, nil
	}
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Rewind()
	return !it.Valid(), nil
}

// snapReader reads a snapshot, checksumming what it reads.
type snapReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (sr *snapReader) ReadByte() (byte, error) {
	b, err := sr.r.ReadByte()
	if err == nil {
		sr.crc.Write([]byte{b})
	}
	return b, err
}

func (sr *snapReader) full(n uint64) ([]byte, error) {
	if n > 1<<30 {
		return nil, fmt.Errorf("store: snapshot record of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(sr.r, b); err != nil {
		return nil, err
	}
	sr.crc.Write(b)
	return b, nil
}

func (sr *snapReader) uvarint() (uint64, error) { return binary.ReadUvarint(sr) }

func (s *Store) restore(r io.Reader) (uint64, error) {
	sr := &snapReader{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(crcTable)}
	fail := func(err error) (uint64, error) {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, fmt.Errorf("store: read snapshot: %w", err)
	}
	magic, err := sr.full(uint64(len(snapshotMagic)))
	if err != nil {
		return fail(err)
	}
	if !bytes.Equal(magic, snapshotMagic[:]) {
		return 0, errors.New("store: not a snapshot (bad magic)")
	}
	applied, err := sr.uvarint()
	if err != nil {
		return fail(err)
	}
	if applied == 0 {
		return 0, errors.New("store: snapshot of an empty state")
	}
	wb := s.db.NewManagedWriteBatch()
	defer wb.Cancel()
	var count uint64
	for {
		tag, err := sr.ReadByte()
		if err != nil {
			return fail(err)
		}
		if tag == 0 {
			break
		}
		if tag != 1 {
			return 0, fmt.Errorf("store: snapshot record tag %d", tag)
		}
		klen, err := sr.uvarint()
		if err != nil {
			return fail(err)
		}
		key, err := sr.full(klen)
		if err != nil {
			return fail(err)
		}
		version, err := sr.uvarint()
		if err != nil {
			return fail(err)
		}
		vlen, err := sr.uvarint()
		if err != nil {
			return fail(err)
		}
		val, err := sr.full(vlen)
		if err != nil {
			return fail(err)
		}
		if len(key) == 0 || !inSnapshot(key) || version == 0 || version > applied {
			return 0, fmt.Errorf("store: snapshot record %q at version %d does not belong", key, version)
		}
		if err := wb.SetEntryAt(badger.NewEntry(key, val), version); err != nil {
			return 0, fmt.Errorf("store: restore record %q: %w", key, err)
		}
		count++
	}
	want, err := sr.uvarint()
	if err != nil {
		return fail(err)
	}
	sum := sr.crc.Sum32()
	var tail [4]byte
	if _, err := io.ReadFull(sr.r, tail[:]); err != nil {
		return fail(err)
	}
	if want != count || binary.BigEndian.Uint32(tail[:]) != sum {
		return 0, errors.New("store: snapshot checksum or record count mismatch")
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("store: restore records: %w", err)
	}
	// The restored revision is readable from here on, at the snapshot's
	// index; the applied index goes last, as in Apply.
	at := reader{txn: s.db.NewTransactionAt(applied, false)}
	meta, err := at.Meta()
	at.txn.Discard()
	if err != nil {
		return 0, err
	}
	wb = s.db.NewManagedWriteBatch()
	for _, kv := range [][2][]byte{
		{revIndexKey(meta.Rev), encodeUint64(applied)},
		{metaKey(metaRestored), encodeUint64(uint64(meta.Rev))},
	} {
		if err := wb.SetEntryAt(badger.NewEntry(kv[0], kv[1]), applied); err != nil {
			wb.Cancel()
			return 0, fmt.Errorf("store: restore bookkeeping: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("store: restore bookkeeping: %w", err)
	}
	return applied, s.writeApplied(applied)
}
