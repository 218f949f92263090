package jute

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"testing"
)

// allocSlack covers what a decode may allocate regardless of input size
// (small records, the first ReadFrame chunk, bufio's buffer) and what the
// fuzzing machinery itself may allocate meanwhile.
const allocSlack = 256 << 10

// allocPerInputByte bounds how many bytes a decode may allocate per input
// byte: the worst case is a long vector of tiny elements (an empty ustring
// is 4 input bytes and a 16-byte string header; an empty multi delete is 17
// input bytes and a request struct plus an op slot), with append doubling.
const allocPerInputByte = 64

// bytesAllocated reports how many heap bytes f allocated.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func checkAllocBound(t *testing.T, input []byte, allocated uint64) {
	t.Helper()
	if limit := uint64(allocPerInputByte*len(input) + allocSlack); allocated > limit {
		t.Fatalf("decoding %d input bytes allocated %d bytes (limit %d)", len(input), allocated, limit)
	}
}

// checkCanonical re-encodes a successfully decoded record and checks that
// decoding and encoding that again is a fixed point. (The first encoding
// may differ from the input: trailing bytes are dropped, null vectors
// become empty, non-zero booleans become 1.)
func checkCanonical(t *testing.T, rec Record, fresh func() Record) {
	t.Helper()
	first, err := Marshal(nil, rec)
	if err != nil {
		t.Fatalf("re-encoding a decoded %T: %v", rec, err)
	}
	again := fresh()
	if err := Unmarshal(first, again); err != nil {
		t.Fatalf("decoding the re-encoded %T: %v", rec, err)
	}
	second, err := Marshal(nil, again)
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("%T encoding is not stable: %x then %x (%v)", rec, first, second, err)
	}
}

func addRecordSeeds(f *testing.F, withHeader bool) {
	for _, tc := range roundTripCases() {
		var b []byte
		if withHeader {
			for op := OpCode(-11); op <= 107; op++ {
				if req, _ := NewRequest(op); req != nil && sameType(req, tc.value) {
					b, _ = Marshal(b, &RequestHeader{Xid: 1, Type: op})
					break
				}
			}
		}
		b, _ = Marshal(b, tc.value)
		f.Add(b)
	}
}

func sameType(a, b Record) bool {
	return a != nil && b != nil && reflect.TypeOf(a) == reflect.TypeOf(b)
}

// FuzzDecodeRequest decodes a frame body as a client request: a
// RequestHeader, then the record for its opcode. This drives every request
// decoder, multi included.
func FuzzDecodeRequest(f *testing.F) {
	addRecordSeeds(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		var (
			hdr RequestHeader
			req Record
			err error
		)
		allocated := bytesAllocated(func() {
			d := NewDecoder(body)
			hdr.Decode(d)
			if d.Err() != nil {
				err = d.Err()
				return
			}
			req, _ = NewRequest(hdr.Type)
			if req != nil {
				req.Decode(d)
			}
			err = d.Err()
		})
		checkAllocBound(t, body, allocated)
		if err == nil && req != nil {
			checkCanonical(t, req, func() Record { r, _ := NewRequest(hdr.Type); return r })
		}
	})
}

// FuzzDecodeConnectRequest decodes a handshake frame body.
func FuzzDecodeConnectRequest(f *testing.F) {
	f.Add([]byte{})
	for _, tc := range roundTripCases() {
		if _, ok := tc.value.(*ConnectRequest); ok {
			b, _ := Marshal(nil, tc.value)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r ConnectRequest
		var err error
		allocated := bytesAllocated(func() { err = Unmarshal(body, &r) })
		checkAllocBound(t, body, allocated)
		if err == nil {
			checkCanonical(t, &r, func() Record { return new(ConnectRequest) })
		}
	})
}

// FuzzDecodeMultiRequest decodes a multi body directly, so the fuzzer does
// not have to find the multi opcode first.
func FuzzDecodeMultiRequest(f *testing.F) {
	for _, tc := range roundTripCases() {
		if _, ok := tc.value.(*MultiRequest); ok {
			b, _ := Marshal(nil, tc.value)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r MultiRequest
		var err error
		allocated := bytesAllocated(func() { err = Unmarshal(body, &r) })
		checkAllocBound(t, body, allocated)
		if err == nil {
			checkCanonical(t, &r, func() Record { return new(MultiRequest) })
		}
	})
}

// FuzzDecodeResponse decodes a reply body for a given opcode, as a test
// client would.
func FuzzDecodeResponse(f *testing.F) {
	for _, tc := range roundTripCases() {
		for op := OpCode(-11); op <= 107; op++ {
			if resp, _ := NewResponse(op); sameType(resp, tc.value) {
				b, _ := Marshal(nil, &ReplyHeader{Xid: 1, Zxid: 2})
				b, _ = Marshal(b, tc.value)
				f.Add(int32(op), b)
				break
			}
		}
	}
	f.Fuzz(func(t *testing.T, op int32, body []byte) {
		var resp Record
		var err error
		allocated := bytesAllocated(func() {
			d := NewDecoder(body)
			var hdr ReplyHeader
			hdr.Decode(d)
			resp, _ = NewResponse(OpCode(op))
			if resp != nil {
				resp.Decode(d)
			}
			err = d.Err()
		})
		// Multi responses may be denser than requests (a delete result is
		// a 9-byte header) so allow them twice the ratio.
		checkAllocBound(t, append(body, body...), allocated)
		if err == nil && resp != nil {
			checkCanonical(t, resp, func() Record { r, _ := NewResponse(OpCode(op)); return r })
		}
	})
}

// FuzzReadFrame reads frames from an arbitrary stream. Besides never
// panicking, a frame reader must not allocate what a peer merely announces.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendFrame(nil, []byte("abc")))
	f.Add([]byte{0x00, 0x0f, 0xff, 0xff, 1, 2, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("ruok"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(stream), 16)
		var frames [][]byte
		var err error
		allocated := bytesAllocated(func() {
			for {
				var fr []byte
				if fr, err = ReadFrame(r, DefaultMaxBuffer); err != nil {
					return
				}
				frames = append(frames, fr)
			}
		})
		checkAllocBound(t, stream, allocated)
		var fe *FrameLengthError
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &fe) {
			t.Fatalf("unexpected error %v", err)
		}
		consumed := 0
		for _, fr := range frames {
			consumed += 4 + len(fr)
		}
		if consumed > len(stream) {
			t.Fatalf("frames hold %d bytes of a %d-byte stream", consumed, len(stream))
		}
		var again []byte
		for _, fr := range frames {
			again = AppendFrame(again, fr)
		}
		if !bytes.Equal(again, stream[:consumed]) {
			t.Fatalf("re-framed frames differ from the stream they came from")
		}
	})
}
