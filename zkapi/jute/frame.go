package jute

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// FrameLengthError reports a frame whose length prefix is negative or above
// the limit. ZooKeeper closes the connection on it; the stream cannot be
// resynchronised because the prefix is the only delimiter.
type FrameLengthError struct {
	Length int32 // the length prefix as received
	Max    int   // the limit it was checked against
}

func (e *FrameLengthError) Error() string {
	return fmt.Sprintf("jute: frame length %d outside [0, %d] (jute.maxbuffer): malformed or too large", e.Length, e.Max)
}

// firstChunk bounds what ReadFrame allocates before the peer has sent the
// bytes it announced, so a client claiming a large frame and then stalling
// costs little memory.
const firstChunk = 32 << 10

// ReadFrame reads one length-prefixed frame and returns its body in a newly
// allocated slice that the caller owns (records decoded from it may alias
// it). A length outside [0, max] is a *FrameLengthError. A stream that ends
// cleanly before a frame starts returns io.EOF; one that ends inside a frame
// returns io.ErrUnexpectedEOF.
func ReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(prefix[:]))
	if n < 0 || int64(n) > int64(max) {
		return nil, &FrameLengthError{Length: n, Max: max}
	}
	size := int(n)
	buf := make([]byte, 0, min(size, firstChunk))
	for len(buf) < size {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(size, 2*cap(buf))-len(buf))
		}
		// Grow may round the capacity up; never read past this frame.
		m, err := io.ReadFull(r, buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("jute: reading %d-byte frame body: %w", size, err)
		}
	}
	return buf, nil
}

// AppendFrame appends body to dst behind its 4-byte big-endian length.
// To encode records straight into a frame, use Encoder.BeginFrame and
// Encoder.EndFrame instead.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}
