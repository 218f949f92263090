package zab

import (
	"bytes"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
	}{
		{"empty payload", Entry{Index: 1, Zxid: MakeZxid(1, 1), Time: 0}},
		{"small", Entry{Index: 42, Zxid: MakeZxid(3, 7), Time: 1_700_000_000_000, Data: []byte("hello")}},
		{"negative time", Entry{Index: 9, Zxid: 1, Time: -5, Data: []byte{0}}},
		{"large", Entry{Index: 1 << 40, Zxid: MakeZxid(1<<31, 1<<31), Time: 1, Data: bytes.Repeat([]byte("x"), 70_000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := appendRecord([]byte("prefix"), tt.e)[len("prefix"):]
			if len(buf) != recordSize(len(tt.e.Data)) {
				t.Fatalf("encoded %d bytes, recordSize says %d", len(buf), recordSize(len(tt.e.Data)))
			}
			got, n, err := decodeRecord(append(buf, "trailing"...))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if n != len(buf) {
				t.Errorf("decoded length %d, want %d", n, len(buf))
			}
			if got.Index != tt.e.Index || got.Zxid != tt.e.Zxid || got.Time != tt.e.Time || !bytes.Equal(got.Data, tt.e.Data) {
				t.Errorf("decoded %+v, want %+v", got, tt.e)
			}
		})
	}
}

func TestDecodeRecordDetectsDamage(t *testing.T) {
	rec := appendRecord(nil, Entry{Index: 5, Zxid: MakeZxid(1, 5), Time: 123, Data: []byte("payload")})
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
		{"length huge", flip(3), errCorruptRecord},
		{"crc flipped", flip(5), errCorruptRecord},
		{"index flipped", flip(9), errCorruptRecord},
		{"zxid flipped", flip(17), errCorruptRecord},
		{"time flipped", flip(25), errCorruptRecord},
		{"data flipped", flip(len(rec) - 1), errCorruptRecord},
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
	f.Add(appendRecord(nil, Entry{Index: 1, Zxid: 1, Time: 1, Data: []byte("seed")}))
	f.Add(appendRecord(nil, Entry{Index: 2, Zxid: 3}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, buf []byte) {
		e, n, err := decodeRecord(buf)
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
		if re := appendRecord(nil, e); !bytes.Equal(re, buf[:n]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, buf[:n])
		}
		// And the tail scanner must agree with the decoder.
		if !looksLikeRecordAt(buf, 0, e.Index-1, e.Index) && e.Index > 0 {
			t.Fatalf("looksLikeRecordAt rejects a record decodeRecord accepts")
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
