package zab

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name       string
		e          Entry
		groupFirst uint64 // 0: a record written before records carried their group
		size       int
	}{
		{"empty payload", Entry{Index: 1, Zxid: MakeZxid(1, 1), Time: 0}, 0, recordSize(0)},
		{"small", Entry{Index: 42, Zxid: MakeZxid(3, 7), Time: 1_700_000_000_000, Data: []byte("hello")}, 0, recordSize(5)},
		{"negative time", Entry{Index: 9, Zxid: 1, Time: -5, Data: []byte{0}}, 0, recordSize(1)},
		{"large", Entry{Index: 1 << 40, Zxid: MakeZxid(1<<31, 1<<31), Time: 1, Data: bytes.Repeat([]byte("x"), 70_000)}, 0, recordSize(70_000)},
		{"proposer", Entry{Index: 7, Zxid: 7, Origin: 3, ReqID: 99, Data: []byte("p")}, 0, recordSize(1) + recordExtSize},
		{"first of its group", Entry{Index: 10, Zxid: 10, Data: []byte("g")}, 10, recordSize(1) + recordGroupSize},
		{"inside its group, with proposer", Entry{Index: 12, Zxid: 12, Origin: 1, ReqID: 2, Data: []byte("g")}, 3, recordSize(1) + recordExtSize + recordGroupSize},
		{"configuration", Entry{Index: 13, Zxid: 13, Kind: EntryMembership, Data: []byte{3, 1, 2, 3, 0}}, 13,
			recordSize(5) + recordGroupSize + recordKindSize},
		{"configuration with proposer", Entry{Index: 14, Zxid: 14, Origin: 3, ReqID: 8, Kind: EntryMembership, Data: []byte{1, 1, 0}}, 13,
			recordSize(3) + recordExtSize + recordGroupSize + recordKindSize},
		{"configuration without group", Entry{Index: 15, Zxid: 15, Kind: EntryMembership, Data: []byte{1, 1, 0}}, 0, recordSize(3) + recordKindSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := appendRecord([]byte("prefix"), tt.e, tt.groupFirst)[len("prefix"):]
			if len(buf) != tt.size {
				t.Fatalf("encoded %d bytes, want %d", len(buf), tt.size)
			}
			if tt.groupFirst != 0 && len(buf) != entryRecordSize(tt.e) {
				t.Errorf("encoded %d bytes, entryRecordSize says %d", len(buf), entryRecordSize(tt.e))
			}
			got, groupFirst, n, err := decodeRecordGroup(append(buf, "trailing"...))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if n != len(buf) {
				t.Errorf("decoded length %d, want %d", n, len(buf))
			}
			if got.Index != tt.e.Index || got.Zxid != tt.e.Zxid || got.Time != tt.e.Time || got.Origin != tt.e.Origin ||
				got.ReqID != tt.e.ReqID || got.Kind != tt.e.Kind || !bytes.Equal(got.Data, tt.e.Data) {
				t.Errorf("decoded %+v, want %+v", got, tt.e)
			}
			if groupFirst != tt.groupFirst {
				t.Errorf("decoded group first %d, want %d", groupFirst, tt.groupFirst)
			}
		})
	}
}

func TestDecodeRecordDetectsDamage(t *testing.T) {
	rec := appendRecord(nil, Entry{Index: 5, Zxid: MakeZxid(1, 5), Time: 123, Data: []byte("payload")}, 4)
	// A checksummed record whose group would begin before index 1.
	badGroup := appendRecord(nil, Entry{Index: 5, Zxid: 5}, 1)
	binary.LittleEndian.PutUint32(badGroup[recordHeaderSize:], 5)
	binary.LittleEndian.PutUint32(badGroup[4:], recordChecksum(badGroup))
	// A record whose kind field says EntryData (never written: a data
	// entry has no kind field) or a kind this binary does not know.
	withKind := func(k EntryKind) []byte {
		b := appendRecord(nil, Entry{Index: 5, Zxid: 5, Kind: EntryMembership, Data: []byte{1, 1, 0}}, 5)
		b[recordHeaderSize+recordGroupSize] = byte(k)
		binary.LittleEndian.PutUint32(b[4:], recordChecksum(b))
		return b
	}
	kindRec := withKind(EntryMembership)
	kindCleared := bytes.Clone(kindRec)
	kindCleared[3] ^= recordKindFlag >> 24
	huge := bytes.Clone(rec)
	huge[3] |= 0x20 // 512 MiB more than the record
	flip := func(off int) []byte {
		b := bytes.Clone(rec)
		b[off] ^= 0x40
		return b
	}
	// A length one larger than the record makes the buffer look a byte
	// short; with that byte present, the checksum must catch it.
	grown := bytes.Clone(rec)
	grown[0]++
	shrunk := bytes.Clone(rec)
	shrunk[0]--
	tests := []struct {
		name string
		buf  []byte
		want error
	}{
		{"empty", nil, errShortRecord},
		{"cut in prefix", rec[:5], errShortRecord},
		{"cut in body", rec[:len(rec)-1], errShortRecord},
		{"length shrunk by one", shrunk, errCorruptRecord},
		{"length grown by one", grown, errShortRecord},
		{"length grown with a trailing byte", append(bytes.Clone(grown), 0), errCorruptRecord},
		{"length huge", huge, errCorruptRecord},
		{"crc flipped", flip(5), errCorruptRecord},
		{"index flipped", flip(9), errCorruptRecord},
		{"zxid flipped", flip(17), errCorruptRecord},
		{"time flipped", flip(25), errCorruptRecord},
		{"group flipped", flip(recordHeaderSize), errCorruptRecord},
		{"group flag cleared", flip(3), errCorruptRecord},
		{"group before index 1", badGroup, errCorruptRecord},
		{"data flipped", flip(len(rec) - 1), errCorruptRecord},
		{"kind data", withKind(EntryData), errCorruptRecord},
		{"kind unknown", withKind(entryKindEnd), errCorruptRecord},
		{"kind flag cleared", kindCleared, errCorruptRecord},
		{"kind flag set on a data record", func() []byte { b := bytes.Clone(rec); b[3] |= recordKindFlag >> 24; return b }(), errCorruptRecord},
		{"zero length", make([]byte, 64), errCorruptRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeRecord(tt.buf)
			if !errors.Is(err, tt.want) {
				t.Fatalf("decode error %v, want %v", err, tt.want)
			}
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add(appendRecord(nil, Entry{Index: 1, Zxid: 1, Time: 1, Data: []byte("seed")}, 0))
	f.Add(appendRecord(nil, Entry{Index: 2, Zxid: 3}, 1))
	f.Add(appendRecord(nil, Entry{Index: 2, Zxid: 3, Origin: 1}, 2))
	f.Add(appendRecord(nil, Entry{Index: 2, Zxid: 3, Origin: 1, Kind: EntryMembership, Data: []byte{1, 1, 0}}, 2))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, buf []byte) {
		e, groupFirst, n, err := decodeRecordGroup(buf)
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with length %d", err, n)
			}
			return
		}
		if n < recordHeaderSize || n > len(buf) {
			t.Fatalf("decoded length %d outside [%d, %d]", n, recordHeaderSize, len(buf))
		}
		// Whatever decodes must re-encode to the same bytes.
		if re := appendRecord(nil, e, groupFirst); !bytes.Equal(re, buf[:n]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, buf[:n])
		}
		// And the tail scanner must agree with the decoder.
		if _, _, _, ok := recordAt(buf, 0, e.Index-1, e.Index); !ok && e.Index > 0 {
			t.Fatalf("recordAt rejects a record decodeRecord accepts")
		}
	})
}

// Preallocated space after a segment's last record reads as zeros; they
// must never decode as a record, whatever length of them remains.
func TestZerosAreNeverARecord(t *testing.T) {
	for _, n := range []int{0, 4, recordPrefixSize, recordHeaderSize, 4096} {
		if _, _, err := decodeRecord(make([]byte, n)); err == nil {
			t.Fatalf("%d zero bytes decoded as a record", n)
		}
	}
}

// FuzzScanSegment feeds recovery's scanner any bytes after a valid header:
// it must never panic, and whatever it accepts as records must be
// consecutive, with rising zxids, ending where it says.
func FuzzScanSegment(f *testing.F) {
	var group []byte
	for i := uint64(3); i <= 6; i++ {
		group = appendRecord(group, Entry{Index: i, Zxid: i, Data: []byte("payload")}, 3)
	}
	group = appendRecord(group, Entry{Index: 7, Zxid: 7, Kind: EntryMembership, Data: []byte{1, 1, 0}}, 3)
	f.Add(group, true)
	f.Add(append(make([]byte, 40), group[40:]...), true)
	f.Add(append(bytes.Clone(group), appendRecord(nil, Entry{Index: 8, Zxid: 8}, 8)...), false)
	f.Add(append(append(bytes.Clone(group[:30]), make([]byte, 20)...), appendRecord(nil, Entry{Index: 4, Zxid: 4}, 3)...), true)
	f.Fuzz(func(t *testing.T, body []byte, isLast bool) {
		buf := append(segmentHeader(3, 2), body...)
		next := uint64(3)
		s, err := scanSegment(buf, 3, 0, isLast, func(e Entry) {
			if e.Index != next {
				t.Fatalf("record %d reported after %d", e.Index, next-1)
			}
			next++
		})
		if err != nil {
			return
		}
		if s.last != next-1 || s.end < segmentHeaderSize || s.end > len(buf) {
			t.Fatalf("scan says last %d end %d; it reported through %d of %d bytes", s.last, s.end, next-1, len(buf))
		}
		if s.torn == nil && len(trimZeros(buf[s.end:])) != 0 {
			t.Fatalf("bytes after the end at %d, neither torn nor refused", s.end)
		}
	})
}
