package jute

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestReadFrame(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 10_000) // larger than firstChunk
	tests := []struct {
		name    string
		stream  []byte
		max     int
		want    [][]byte
		wantErr error // the error after the frames in want
	}{
		{"one frame", AppendFrame(nil, []byte("abc")), 16, [][]byte{[]byte("abc")}, io.EOF},
		{"empty frame", AppendFrame(nil, []byte{}), 16, [][]byte{{}}, io.EOF},
		{"back to back", AppendFrame(AppendFrame(nil, []byte("a")), []byte("bc")), 16, [][]byte{[]byte("a"), []byte("bc")}, io.EOF},
		{"at the limit", AppendFrame(nil, []byte("abcd")), 4, [][]byte{[]byte("abcd")}, io.EOF},
		{"large frame read in chunks", AppendFrame(nil, big), DefaultMaxBuffer, [][]byte{big}, io.EOF},
		{"large frame then small", AppendFrame(AppendFrame(nil, big), []byte("z")), DefaultMaxBuffer, [][]byte{big, []byte("z")}, io.EOF},
		{"no data", nil, 16, nil, io.EOF},
		{"truncated prefix", []byte{0, 0}, 16, nil, io.ErrUnexpectedEOF},
		{"truncated body", []byte{0, 0, 0, 5, 'a'}, 16, nil, io.ErrUnexpectedEOF},
		{"truncated large body", AppendFrame(nil, big)[:len(big)/2], DefaultMaxBuffer, nil, io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReader(bytes.NewReader(tc.stream))
			for i, want := range tc.want {
				got, err := ReadFrame(r, tc.max)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("frame %d: got %d bytes, want %d", i, len(got), len(want))
				}
			}
			if _, err := ReadFrame(r, tc.max); !errors.Is(err, tc.wantErr) {
				t.Fatalf("final err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestReadFrameBadLength(t *testing.T) {
	tests := []struct {
		name   string
		prefix []byte
		max    int
		length int32
	}{
		{"negative", []byte{0xff, 0xff, 0xff, 0xfe}, DefaultMaxBuffer, -2},
		{"one over the limit", []byte{0, 0x10, 0, 0}, DefaultMaxBuffer, DefaultMaxBuffer + 1},
		{"far over a small limit", []byte{0, 0, 1, 0}, 255, 256},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReader(bytes.NewReader(append(tc.prefix, "payload"...)))
			_, err := ReadFrame(r, tc.max)
			var fe *FrameLengthError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *FrameLengthError", err)
			}
			if fe.Length != tc.length || fe.Max != tc.max {
				t.Fatalf("FrameLengthError = %+v, want length %d max %d", fe, tc.length, tc.max)
			}
		})
	}
}

func TestFrameEncoderMatchesAppendFrame(t *testing.T) {
	body, _ := Marshal(nil, &GetDataRequest{Path: "/x", Watch: true})
	e := NewEncoder([]byte("prev"))
	start := e.BeginFrame()
	(&GetDataRequest{Path: "/x", Watch: true}).Encode(e)
	e.EndFrame(start)
	if want := AppendFrame([]byte("prev"), body); !bytes.Equal(e.Bytes(), want) {
		t.Fatalf("BeginFrame/EndFrame = %x, AppendFrame = %x", e.Bytes(), want)
	}
}
