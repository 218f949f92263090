package zab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A record on disk is
//
//	bodyLen uint32 | crc uint32 | index uint64 | zxid uint64 | time int64 | data
//
// little endian, where bodyLen counts everything after the crc and crc is
// CRC-32C over bodyLen's four bytes followed by the body. Covering the length
// means a damaged length field is caught by the checksum rather than
// silently shifting every later record.
//
// Three flag bits of bodyLen add optional fields between time and data, in
// this order:
//
//   - recordExtFlag: origin uint64 | reqID uint64, for an entry that names
//     its proposer (Origin or ReqID non-zero).
//   - recordGroupFlag: groupPos uint32, how many records precede this one
//     in the group write (one write and one fdatasync) that wrote it. It
//     tells recovery which records were acknowledged: a record of a later
//     group proves an earlier group was synced (see scanSegment). Every
//     record the log writes now carries it; records written before it
//     existed do not, and read as before.
//   - recordKindFlag: kind uint8, the entry's Kind, for an entry that is
//     not a state machine payload (EntryMembership). Only a segment of
//     format 4 may hold such a record (see segment.go): in a format-3
//     segment a binary that does not know the bit would read it as part of
//     a huge length, and at the end of the last segment cut the record as
//     a torn tail. A kind this binary does not know makes the record
//     corrupt, so a new kind needs a new segment format.
const (
	recordPrefixSize = 8  // bodyLen + crc
	recordFixedBody  = 24 // index + zxid + time
	recordExtSize    = 16 // origin + reqID
	recordGroupSize  = 4  // groupPos
	recordKindSize   = 1  // kind
	recordExtBody    = recordFixedBody + recordExtSize
	recordExtFlag    = 1 << 31
	recordGroupFlag  = 1 << 30
	recordKindFlag   = 1 << 29
	recordFlags      = recordExtFlag | recordGroupFlag | recordKindFlag
	recordHeaderSize = recordPrefixSize + recordFixedBody
	maxRecordBody    = 256 << 20 // hard bound so a damaged length never drives a huge allocation
	maxEntryDataHard = maxRecordBody - recordExtBody - recordGroupSize - recordKindSize
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var (
	// errShortRecord means the buffer ends before the record does: at the
	// tail of a log this is a torn write.
	errShortRecord = errors.New("record truncated")
	// errCorruptRecord means the record's framing or checksum is wrong.
	errCorruptRecord = errors.New("record corrupt")
)

// recordSize is the encoded size of a state machine entry with dataLen
// payload bytes, no proposer and no group.
func recordSize(dataLen int) int { return recordHeaderSize + dataLen }

// entryRecordSize is the encoded size of e as the log writes it (with its
// group).
func entryRecordSize(e Entry) int {
	n := recordSize(len(e.Data)) + recordGroupSize
	if e.Origin != 0 || e.ReqID != 0 {
		n += recordExtSize
	}
	if e.Kind != EntryData {
		n += recordKindSize
	}
	return n
}

// appendRecord appends e's encoding to dst. groupFirst is the index of the
// first entry of the group write e belongs to, so at most e.Index; 0
// leaves the group out (as records written before it existed did). A group
// is one in-memory write, far below 2^32 records, so its position fits.
func appendRecord(dst []byte, e Entry, groupFirst uint64) []byte {
	start := len(dst)
	ext := e.Origin != 0 || e.ReqID != 0
	bodyLen := uint32(recordFixedBody + len(e.Data))
	if ext {
		bodyLen += recordExtSize
		bodyLen |= recordExtFlag
	}
	if groupFirst != 0 {
		bodyLen += recordGroupSize
		bodyLen |= recordGroupFlag
	}
	if e.Kind != EntryData {
		bodyLen += recordKindSize
		bodyLen |= recordKindFlag
	}
	dst = binary.LittleEndian.AppendUint32(dst, bodyLen)
	dst = binary.LittleEndian.AppendUint32(dst, 0) // crc, filled below
	dst = binary.LittleEndian.AppendUint64(dst, e.Index)
	dst = binary.LittleEndian.AppendUint64(dst, e.Zxid)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Time))
	if ext {
		dst = binary.LittleEndian.AppendUint64(dst, e.Origin)
		dst = binary.LittleEndian.AppendUint64(dst, e.ReqID)
	}
	if groupFirst != 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(e.Index-groupFirst))
	}
	if e.Kind != EntryData {
		dst = append(dst, byte(e.Kind))
	}
	dst = append(dst, e.Data...)
	binary.LittleEndian.PutUint32(dst[start+4:], recordChecksum(dst[start:]))
	return dst
}

// recordChecksum computes the checksum of an encoded record (whose crc
// field is ignored).
func recordChecksum(rec []byte) uint32 {
	c := crc32.Update(0, crcTable, rec[0:4])
	return crc32.Update(c, crcTable, rec[recordPrefixSize:])
}

// decodeRecord decodes the record at the start of buf and returns it with
// its encoded length. The entry's Data aliases buf. It never panics, whatever
// buf holds.
func decodeRecord(buf []byte) (Entry, int, error) {
	e, _, n, err := decodeRecordGroup(buf)
	return e, n, err
}

// decodeRecordGroup is decodeRecord that also returns the index of the
// first entry of the group write the record belongs to, or 0 if the record
// does not say.
func decodeRecordGroup(buf []byte) (e Entry, groupFirst uint64, n int, err error) {
	if len(buf) < recordPrefixSize {
		return Entry{}, 0, 0, errShortRecord
	}
	rawLen := binary.LittleEndian.Uint32(buf)
	bodyLen, fixed, ok := recordBodyLen(rawLen)
	if !ok {
		return Entry{}, 0, 0, fmt.Errorf("%w: body length %#x out of range", errCorruptRecord, rawLen)
	}
	n = recordPrefixSize + int(bodyLen)
	if len(buf) < n {
		return Entry{}, 0, 0, errShortRecord
	}
	rec := buf[:n]
	if want, got := binary.LittleEndian.Uint32(rec[4:]), recordChecksum(rec); want != got {
		return Entry{}, 0, 0, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", errCorruptRecord, want, got)
	}
	e = Entry{
		Index: binary.LittleEndian.Uint64(rec[8:]),
		Zxid:  binary.LittleEndian.Uint64(rec[16:]),
		Time:  int64(binary.LittleEndian.Uint64(rec[24:])),
		Data:  rec[recordPrefixSize+fixed : n : n],
	}
	off := recordPrefixSize + recordFixedBody
	if rawLen&recordExtFlag != 0 {
		e.Origin = binary.LittleEndian.Uint64(rec[off:])
		e.ReqID = binary.LittleEndian.Uint64(rec[off+8:])
		off += recordExtSize
	}
	if rawLen&recordGroupFlag != 0 {
		pos := uint64(binary.LittleEndian.Uint32(rec[off:]))
		if pos >= e.Index {
			return Entry{}, 0, 0, fmt.Errorf("%w: record %d says %d records of its group precede it", errCorruptRecord, e.Index, pos)
		}
		groupFirst = e.Index - pos
		off += recordGroupSize
	}
	if rawLen&recordKindFlag != 0 {
		// Only a kind other than EntryData is written, so that a record
		// has one encoding.
		e.Kind = EntryKind(rec[off])
		if e.Kind == EntryData || e.Kind >= entryKindEnd {
			return Entry{}, 0, 0, fmt.Errorf("%w: record %d has unknown kind %d", errCorruptRecord, e.Index, e.Kind)
		}
	}
	return e, groupFirst, n, nil
}

// recordBodyLen splits a stored bodyLen field into the body length and the
// size of the body's fixed part (the optional fields included), and checks
// the length is in range.
func recordBodyLen(raw uint32) (bodyLen uint32, fixed int, ok bool) {
	bodyLen, fixed = raw&^recordFlags, recordFixedBody
	if raw&recordExtFlag != 0 {
		fixed += recordExtSize
	}
	if raw&recordGroupFlag != 0 {
		fixed += recordGroupSize
	}
	if raw&recordKindFlag != 0 {
		fixed += recordKindSize
	}
	return bodyLen, fixed, bodyLen >= uint32(fixed) && bodyLen <= maxRecordBody
}

// recordAt returns the valid record whose index lies in (after, limit]
// that starts at buf[off:], if one does, with its group's first index and
// its length. It filters on the cheap fields before paying for a checksum,
// so scanning every offset of a damaged tail stays fast.
func recordAt(buf []byte, off int, after, limit uint64) (e Entry, groupFirst uint64, n int, ok bool) {
	rest := buf[off:]
	if len(rest) < recordHeaderSize {
		return Entry{}, 0, 0, false
	}
	bodyLen, _, ok := recordBodyLen(binary.LittleEndian.Uint32(rest))
	if !ok || int(bodyLen) > len(rest)-recordPrefixSize {
		return Entry{}, 0, 0, false
	}
	idx := binary.LittleEndian.Uint64(rest[8:])
	if idx <= after || idx > limit {
		return Entry{}, 0, 0, false
	}
	e, groupFirst, n, err := decodeRecordGroup(rest)
	return e, groupFirst, n, err == nil
}
