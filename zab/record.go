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
// A record whose entry names its proposer (Origin or ReqID non-zero) sets
// the top bit of bodyLen and carries origin uint64 | reqID uint64 between
// time and data. Records written before replication never set that bit, so
// they read as before.
const (
	recordPrefixSize = 8  // bodyLen + crc
	recordFixedBody  = 24 // index + zxid + time
	recordExtBody    = recordFixedBody + 16
	recordExtFlag    = 1 << 31
	recordHeaderSize = recordPrefixSize + recordFixedBody
	maxRecordBody    = 256 << 20 // hard bound so a damaged length never drives a huge allocation
	maxEntryDataHard = maxRecordBody - recordExtBody
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var (
	// errShortRecord means the buffer ends before the record does: at the
	// tail of a log this is a torn write.
	errShortRecord = errors.New("record truncated")
	// errCorruptRecord means the record's framing or checksum is wrong.
	errCorruptRecord = errors.New("record corrupt")
)

// recordSize is the encoded size of an entry with dataLen payload bytes and
// no proposer.
func recordSize(dataLen int) int { return recordHeaderSize + dataLen }

// entryRecordSize is the encoded size of e.
func entryRecordSize(e Entry) int {
	if e.Origin != 0 || e.ReqID != 0 {
		return recordPrefixSize + recordExtBody + len(e.Data)
	}
	return recordSize(len(e.Data))
}

// appendRecord appends e's encoding to dst.
func appendRecord(dst []byte, e Entry) []byte {
	start := len(dst)
	ext := e.Origin != 0 || e.ReqID != 0
	bodyLen := uint32(recordFixedBody + len(e.Data))
	if ext {
		bodyLen = uint32(recordExtBody+len(e.Data)) | recordExtFlag
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
	if len(buf) < recordPrefixSize {
		return Entry{}, 0, errShortRecord
	}
	rawLen := binary.LittleEndian.Uint32(buf)
	bodyLen, fixed, ok := recordBodyLen(rawLen)
	if !ok {
		return Entry{}, 0, fmt.Errorf("%w: body length %#x out of range", errCorruptRecord, rawLen)
	}
	n := recordPrefixSize + int(bodyLen)
	if len(buf) < n {
		return Entry{}, 0, errShortRecord
	}
	rec := buf[:n]
	if want, got := binary.LittleEndian.Uint32(rec[4:]), recordChecksum(rec); want != got {
		return Entry{}, 0, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", errCorruptRecord, want, got)
	}
	e := Entry{
		Index: binary.LittleEndian.Uint64(rec[8:]),
		Zxid:  binary.LittleEndian.Uint64(rec[16:]),
		Time:  int64(binary.LittleEndian.Uint64(rec[24:])),
		Data:  rec[recordPrefixSize+fixed : n : n],
	}
	if fixed == recordExtBody {
		e.Origin = binary.LittleEndian.Uint64(rec[32:])
		e.ReqID = binary.LittleEndian.Uint64(rec[40:])
	}
	return e, n, nil
}

// recordBodyLen splits a stored bodyLen field into the body length and the
// size of the body's fixed part, and checks the length is in range.
func recordBodyLen(raw uint32) (bodyLen uint32, fixed int, ok bool) {
	bodyLen, fixed = raw, recordFixedBody
	if raw&recordExtFlag != 0 {
		bodyLen, fixed = raw&^recordExtFlag, recordExtBody
	}
	return bodyLen, fixed, bodyLen >= uint32(fixed) && bodyLen <= maxRecordBody
}

// looksLikeRecordAt reports whether a valid record whose index lies in
// (after, limit] starts at buf[off:]. It filters on the cheap fields before
// paying for a checksum, so scanning every offset of a damaged tail stays
// fast.
func looksLikeRecordAt(buf []byte, off int, after, limit uint64) bool {
	rest := buf[off:]
	if len(rest) < recordHeaderSize {
		return false
	}
	bodyLen, _, ok := recordBodyLen(binary.LittleEndian.Uint32(rest))
	if !ok || int(bodyLen) > len(rest)-recordPrefixSize {
		return false
	}
	idx := binary.LittleEndian.Uint64(rest[8:])
	if idx <= after || idx > limit {
		return false
	}
	_, _, err := decodeRecord(rest)
	return err == nil
}
