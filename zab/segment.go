package zab

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A segment file is named after the index of its first record
// (zero-padded, so names sort like indexes) and starts with a header that
// repeats that index and, since replication, the zxid of the entry just
// before it: after trimming, or after a follower installs a snapshot, the
// log must still know where its history joins the state machine's. A
// segment is created whole, header included, before any record goes into
// it, so a valid log never holds a torn header.
//
// The header's magic is its version. The current one (4) promises that
// every record in the segment was written with its group (see record.go),
// and is the only one that may hold records with a kind (configuration
// entries). The log appends only to a current segment, so that a binary
// that does not know groups or kinds refuses the segment (its header is of
// a format it does not know) rather than take its records for a torn
// tail. Segments of versions 1 (no previous zxid), 2 (records without
// groups) and 3 (no kinds) are still read, and sealed on open (see
// resume). A header of a later version is refused by name.
//
// A segment file is preallocated to the segment size: the space after its
// last record reads as zeros, and zeros are never a record (a body length
// of 0 is out of range), so a segment's records end where the rest of the
// file is all zeros.
const (
	segmentSuffix       = ".log"
	segmentMagicV1      = "JANUSZAB"
	segmentMagicV2      = "JANUSZB2"
	segmentMagicV3      = "JANUSZB3"
	segmentMagic        = "JANUSZB4"
	segmentMagicFamily  = "JANUSZB" // followed by the version digit, from 2 on
	segmentHeaderSizeV1 = len(segmentMagicV1) + 8
	segmentHeaderSize   = len(segmentMagic) + 16
)

func segmentName(first uint64) string {
	return fmt.Sprintf("%020d%s", first, segmentSuffix)
}

// parseSegmentName returns the first index encoded in a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(base) != 20 {
		return 0, false
	}
	first, err := strconv.ParseUint(base, 10, 64)
	if err != nil || first == 0 {
		return 0, false
	}
	return first, true
}

func segmentHeader(first, prevZxid uint64) []byte {
	b := make([]byte, 0, segmentHeaderSize)
	b = append(b, segmentMagic...)
	b = binary.LittleEndian.AppendUint64(b, first)
	return binary.LittleEndian.AppendUint64(b, prevZxid)
}

// parseSegmentHeader returns the header's length, first index and previous
// zxid (0 in a first-version header).
func parseSegmentHeader(buf []byte) (size int, first, prevZxid uint64, err error) {
	switch {
	case len(buf) >= segmentHeaderSize && (isCurrentSegment(buf) || hasMagic(buf, segmentMagicV3) || hasMagic(buf, segmentMagicV2)):
		return segmentHeaderSize, binary.LittleEndian.Uint64(buf[8:]), binary.LittleEndian.Uint64(buf[16:]), nil
	case len(buf) >= segmentHeaderSizeV1 && hasMagic(buf, segmentMagicV1):
		return segmentHeaderSizeV1, binary.LittleEndian.Uint64(buf[8:]), 0, nil
	case len(buf) >= len(segmentMagic) && hasMagic(buf, segmentMagicFamily) && buf[len(segmentMagicFamily)] > segmentMagic[len(segmentMagicFamily)] &&
		buf[len(segmentMagicFamily)] <= '9':
		// Written by a later version: its records may mean what this
		// binary cannot read, and must not be taken for damage.
		return 0, 0, 0, fmt.Errorf("segment format %c is newer than this binary reads (%c at most)", buf[len(segmentMagicFamily)], segmentMagic[len(segmentMagicFamily)])
	}
	return 0, 0, 0, errors.New("bad segment header")
}

// isCurrentSegment reports whether buf starts with a current-version
// segment header.
func isCurrentSegment(buf []byte) bool { return hasMagic(buf, segmentMagic) }

func hasMagic(buf []byte, magic string) bool {
	return len(buf) >= len(magic) && string(buf[:len(magic)]) == magic
}

// segmentScan is what reading one segment found.
type segmentScan struct {
	last     uint64 // index of the last whole record; first-1 if none
	lastZxid uint64
	lastTime int64
	end      int   // offset just past the last whole record
	torn     error // non-nil when the segment has a damaged tail after end
	// tornRecords counts the valid records of the torn group found beyond
	// the damage (its pages were written back out of order).
	tornRecords int
	header      int    // header size
	prevZxid    uint64 // the header's previous zxid (0 if it has none)
	current     bool   // the header is the current version (4), which may hold records with a kind
}

// scanSegment validates a segment's bytes. first is the index its name
// promises; prevZxid the zxid of the record before it. onRecord, if not
// nil, sees every whole record in order.
//
// Where the records stop and only zeros follow, up to the end of buf, is
// the segment's end (its unused preallocated space), in any segment.
// Anything else after the last whole record is damage, and whether the log
// may cut it depends on whether it can hold an acknowledged record.
//
// The log writes each group of records with one write and then one
// fdatasync, and writes nothing more before that fdatasync returns. So at
// any moment at most one group write is not yet on stable storage: the
// last one, at the end of the last segment (a group never spans segments,
// and a segment is created durable before any group goes into it). A power
// loss may leave any part of that group missing, torn, zeroed, or written
// back in any page order; every byte before it was synced, and so was every
// byte of a sealed (not last) segment. A record is acknowledged only once
// the fdatasync after its group returned, so the only bytes that may be
// damaged without losing an acknowledged record are those of the last
// group write.
//
// Hence, in a sealed segment any damage is an error. In the last segment,
// with the first damaged record expected to be index k, every valid record
// after the damage is examined: one written by a later group write than
// k's (its group began after k) proves that k's group had been synced
// before it was written, so the damage is in acknowledged data and is an
// error; one that does not say its group (written before records carried
// it) gives no such proof and is an error too. Records of k's own group may
// lie beyond the damage (pages written back out of order); they and the
// damage are a torn tail, which openWAL cuts. Damage to the last group
// written is therefore always cut, even if its fdatasync had returned:
// nothing on disk tells a torn write of that group from later damage to
// it.
func scanSegment(buf []byte, first, prevZxid uint64, isLast bool, onRecord func(Entry)) (segmentScan, error) {
	hdr, got, hdrPrev, err := parseSegmentHeader(buf)
	if err != nil {
		return segmentScan{}, err
	}
	if got != first {
		return segmentScan{}, fmt.Errorf("segment header says first index %d, file name says %d", got, first)
	}
	if prevZxid == 0 {
		prevZxid = hdrPrev
	}
	s := segmentScan{last: first - 1, lastZxid: prevZxid, end: hdr, header: hdr, prevZxid: hdrPrev, current: isCurrentSegment(buf)}
	for s.end < len(buf) {
		e, n, err := decodeRecord(buf[s.end:])
		if err != nil {
			rest := trimZeros(buf[s.end:])
			if len(rest) == 0 {
				return s, nil
			}
			if !isLast {
				return s, fmt.Errorf("damaged record at offset %d (index %d) in a sealed segment: %w", s.end, s.last+1, err)
			}
			after, acked := checkTornTail(buf, s.end, s.end+len(rest), s.last+1)
			if acked != nil {
				return s, fmt.Errorf("damaged record at offset %d (index %d) %v: %w", s.end, s.last+1, acked, err)
			}
			s.torn, s.tornRecords = err, after
			return s, nil
		}
		if e.Index != s.last+1 {
			return s, fmt.Errorf("record at offset %d has index %d, want %d", s.end, e.Index, s.last+1)
		}
		if e.Kind != EntryData && !s.current {
			// No binary writes one: a kind goes only into a segment whose
			// format an older binary refuses.
			return s, fmt.Errorf("record %d at offset %d has kind %d in a segment of a format without kinds", e.Index, s.end, e.Kind)
		}
		if e.Zxid <= s.lastZxid {
			return s, fmt.Errorf("record %d at offset %d has zxid %s, not above the previous %s",
				e.Index, s.end, FormatZxid(e.Zxid), FormatZxid(s.lastZxid))
		}
		s.last, s.lastZxid, s.lastTime = e.Index, e.Zxid, e.Time
		s.end += n
		if onRecord != nil {
			onRecord(e)
		}
	}
	return s, nil
}

// checkTornTail examines buf[from:to], damage at the end of the last
// segment that begins where record k was expected, and returns an error
// saying why if a valid record in it shows the damage covers an
// acknowledged record (see scanSegment). Otherwise it returns how many
// valid records of k's group it found there.
func checkTornTail(buf []byte, from, to int, k uint64) (sameGroup int, err error) {
	// Any valid record after the damage has index k or higher; each takes
	// at least recordHeaderSize bytes, which bounds how high. It starts
	// with a non-zero length, so before to.
	limit := k + uint64(len(buf)-from)/recordHeaderSize
	for p := from + 1; p < to; {
		e, groupFirst, n, ok := recordAt(buf, p, k-1, limit)
		if !ok {
			p++
			continue
		}
		switch {
		case groupFirst == 0:
			return 0, fmt.Errorf("is followed by a valid record at offset %d (index %d) that does not say which group write it belongs to", p, e.Index)
		case groupFirst > k:
			return 0, fmt.Errorf("is followed by a valid record at offset %d (index %d) of a later group write (from index %d), so it had been synced", p, e.Index, groupFirst)
		case e.Index == k || p < from+int(e.Index-k)*recordHeaderSize:
			// The group write put record k at from and the ones after
			// it in order, each at least a header long: these bytes
			// are not that write's.
			return 0, fmt.Errorf("is followed by a valid record at offset %d (index %d) where its group write cannot have put it", p, e.Index)
		}
		// A record of k's own group, written back before the damaged
		// part: records inside its payload are payload.
		sameGroup++
		p += n
	}
	return sameGroup, nil
}

// trimZeros returns b without its trailing zero bytes.
func trimZeros(b []byte) []byte {
	const chunk = 4096
	var zeros [chunk]byte
	for len(b) >= chunk && bytes.Equal(b[len(b)-chunk:], zeros[:]) {
		b = b[:len(b)-chunk]
	}
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}
