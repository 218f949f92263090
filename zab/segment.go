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
// it, so a valid log never holds a torn header. Segments with the first
// header version (no previous zxid) are still read.
//
// A segment file is preallocated to the segment size: the space after its
// last record reads as zeros, and zeros are never a record (a body length
// of 0 is out of range), so a segment's records end where the rest of the
// file is all zeros.
const (
	segmentSuffix       = ".log"
	segmentMagicV1      = "JANUSZAB"
	segmentMagic        = "JANUSZB2"
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
	case len(buf) >= segmentHeaderSize && string(buf[:len(segmentMagic)]) == segmentMagic:
		return segmentHeaderSize, binary.LittleEndian.Uint64(buf[8:]), binary.LittleEndian.Uint64(buf[16:]), nil
	case len(buf) >= segmentHeaderSizeV1 && string(buf[:len(segmentMagicV1)]) == segmentMagicV1:
		return segmentHeaderSizeV1, binary.LittleEndian.Uint64(buf[8:]), 0, nil
	}
	return 0, 0, 0, errors.New("bad segment header")
}

// segmentScan is what reading one segment found.
type segmentScan struct {
	last     uint64 // index of the last whole record; first-1 if none
	lastZxid uint64
	lastTime int64
	end      int    // offset just past the last whole record
	torn     error  // non-nil when the segment has a damaged tail after end
	header   int    // header size
	prevZxid uint64 // the header's previous zxid (0 if it has none)
}

// scanSegment validates a segment's bytes. first is the index its name
// promises; prevZxid the zxid of the record before it. Where the records
// stop and only zeros follow, up to the end of buf, is the segment's end
// (its unused preallocated space), in any segment. Otherwise, in a sealed
// (not last) segment any damaged record, or any non-zero byte after the
// last record, is an error. In the last segment it is a torn tail, unless
// some valid later record follows it, which means the damage is in the
// middle of acknowledged data: zeros then valid records count as damage
// too, never as the end. onRecord, if not nil, sees every whole record in
// order.
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
	s := segmentScan{last: first - 1, lastZxid: prevZxid, end: hdr, header: hdr, prevZxid: hdrPrev}
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
			// Any valid record after the damage must have a higher index; each
			// takes at least recordHeaderSize bytes, which bounds how high. It
			// starts with a non-zero length, so before the trailing zeros.
			limit := s.last + uint64(len(buf)-s.end)/recordHeaderSize + 1
			for p := s.end + 1; p < s.end+len(rest); p++ {
				if looksLikeRecordAt(buf, p, s.last, limit) {
					return s, fmt.Errorf("damaged record at offset %d (index %d) is followed by a valid record at offset %d: %w",
						s.end, s.last+1, p, err)
				}
			}
			s.torn = err
			return s, nil
		}
		if e.Index != s.last+1 {
			return s, fmt.Errorf("record at offset %d has index %d, want %d", s.end, e.Index, s.last+1)
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
