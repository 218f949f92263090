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

	badger "github.com/dgraph-io/badger/v4"
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
	// The view's timestamp is the applied index it shows.
	applied := v.txn.ReadTs()

	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 256<<10)
	var num []byte
	put := func(b ...[]byte) error {
		for _, p := range b {
			if _, err := bw.Write(p); err != nil {
				return err
			}
		}
		return nil
	}
	uv := func(x uint64) []byte { num = binary.AppendUvarint(num[:0], x); return num }
	if err := put(snapshotMagic[:]); err != nil {
		return 0, fmt.Errorf("store: write snapshot: %w", err)
	}
	if err := put(uv(applied)); err != nil {
		return 0, fmt.Errorf("store: write snapshot: %w", err)
	}
	var count uint64
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
		err := item.Value(func(val []byte) error {
			if err := put([]byte{1}, uv(uint64(len(key))), key); err != nil {
				return err
			}
			if err := put(uv(item.Version())); err != nil {
				return err
			}
			return put(uv(uint64(len(val))), val)
		})
		if err != nil {
			return 0, fmt.Errorf("store: write snapshot record %q: %w", key, err)
		}
		count++
	}
	if err := put([]byte{0}, uv(count)); err != nil {
		return 0, fmt.Errorf("store: write snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("store: write snapshot: %w", err)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return 0, fmt.Errorf("store: write snapshot checksum: %w", err)
	}
	return applied, nil
}

// inSnapshot says whether a record belongs in a snapshot: state yes; history
// and the store's own bookkeeping no.
func inSnapshot(key []byte) bool {
	switch key[0] {
	case prefixRevIndex, prefixEventLog:
		return false
	case prefixMeta:
		name := string(key[1:])
		return name != metaApplied && name != metaRestored && name != metaReclaim
	}
	return true
}

var errNotEmpty = errors.New("store: restore needs an empty store")

// RestoreSnapshot loads a snapshot written by WriteSnapshot into an empty
// store. On error the store is wiped back to empty. Nothing may read the
// store while it restores (Badger's wipe does not tolerate readers).
func (s *Store) RestoreSnapshot(r io.Reader) error {
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
	at := reader{s.db.NewTransactionAt(applied, false)}
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
