package jute

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// DefaultMaxBuffer is ZooKeeper's default jute.maxbuffer: the largest frame a
// server accepts from a client, and the per-field limit clients expect.
const DefaultMaxBuffer = 0xfffff

// defaultMaxFieldLength mirrors BinaryInputArchive's checkLength bound:
// jute.maxbuffer plus zookeeper.jute.maxbuffer.extrasize, whose default is
// jute.maxbuffer again.
const defaultMaxFieldLength = 2 * DefaultMaxBuffer

// Errors a Decoder reports, wrapped with the offset and the field being read.
var (
	// ErrTruncated means the input ended inside a field or record.
	ErrTruncated = errors.New("jute: input truncated")
	// ErrInvalidLength means a length or count was negative (other than -1
	// for null) or larger than the decoder's limit.
	ErrInvalidLength = errors.New("jute: invalid length")
	// ErrInvalidMulti means a multi request or response held an op type
	// that may not appear there, or mixed read and write ops.
	ErrInvalidMulti = errors.New("jute: invalid multi op")
)

// A Record is one jute record: a header, a request or a response body.
type Record interface {
	// Encode appends the record to e.
	Encode(e *Encoder)
	// Decode reads the record from d; errors are recorded in d.
	Decode(d *Decoder)
}

// Decoder reads jute primitives from a byte slice. It records the first
// error and returns zero values from then on, so callers decode a whole
// record and check Err once.
type Decoder struct {
	buf    []byte
	off    int
	err    error
	maxLen int
}

// NewDecoder returns a Decoder over b that allows buffers and strings as
// long as ZooKeeper does by default.
func NewDecoder(b []byte) *Decoder {
	return &Decoder{buf: b, maxLen: defaultMaxFieldLength}
}

// Reset makes d read from b, forgetting any error.
func (d *Decoder) Reset(b []byte) {
	max := d.maxLen
	if max == 0 {
		max = defaultMaxFieldLength
	}
	*d = Decoder{buf: b, maxLen: max}
}

// SetMaxLength sets the largest buffer or string length accepted.
// Lengths beyond the input are rejected regardless.
func (d *Decoder) SetMaxLength(n int) { d.maxLen = n }

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Remaining returns how many input bytes are left unread.
func (d *Decoder) Remaining() int { return len(d.buf) - d.off }

// Offset returns how many input bytes have been read.
func (d *Decoder) Offset() int { return d.off }

// Fail records err as the decoder's error unless one is already recorded.
// Record decoders use it for semantic errors (an invalid multi op type).
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("at offset %d: %w", d.off, err)
	}
}

func (d *Decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.buf)-d.off {
		d.Fail(fmt.Errorf("reading %s (%d bytes, %d left): %w", what, n, len(d.buf)-d.off, ErrTruncated))
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// Int32 reads a jute int.
func (d *Decoder) Int32() int32 {
	b := d.take(4, "int")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// Int64 reads a jute long.
func (d *Decoder) Int64() int64 {
	b := d.take(8, "long")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Bool reads a jute boolean; like Java, any non-zero byte is true.
func (d *Decoder) Bool() bool {
	b := d.take(1, "boolean")
	if b == nil {
		return false
	}
	return b[0] != 0
}

// length reads a buffer or string length; -1 (null) is returned as is.
func (d *Decoder) length(what string) int {
	n := d.Int32()
	if d.err != nil || n == -1 {
		return int(n)
	}
	if n < 0 || int(n) > d.maxLen {
		d.Fail(fmt.Errorf("%s length %d (limit %d): %w", what, n, d.maxLen, ErrInvalidLength))
		return 0
	}
	return int(n)
}

// Buffer reads a jute buffer. Null (-1) is returned as nil and an empty
// buffer as a non-nil empty slice. The result aliases the decoder's input
// and has no spare capacity, so appending to it never overwrites the input.
func (d *Decoder) Buffer() []byte {
	n := d.length("buffer")
	if n == -1 || d.err != nil {
		return nil
	}
	return d.take(n, "buffer")
}

// UString reads a jute ustring. Null (-1) reads as "".
func (d *Decoder) UString() string {
	n := d.length("ustring")
	if n <= 0 || d.err != nil {
		return ""
	}
	b := d.take(n, "ustring")
	if b == nil {
		return ""
	}
	return string(b)
}

// VectorLen reads a vector's element count. It returns -1 for a null
// vector. minElemSize is the fewest bytes one element occupies; a count that
// the remaining input cannot hold is an error, so callers may allocate
// count elements without trusting the input further.
func (d *Decoder) VectorLen(minElemSize int) int {
	n := d.Int32()
	if d.err != nil || n == -1 {
		return int(n)
	}
	if n < 0 {
		d.Fail(fmt.Errorf("vector count %d: %w", n, ErrInvalidLength))
		return 0
	}
	if minElemSize < 1 {
		minElemSize = 1
	}
	if int64(n)*int64(minElemSize) > int64(d.Remaining()) {
		d.Fail(fmt.Errorf("vector of %d elements in %d bytes: %w", n, d.Remaining(), ErrTruncated))
		return 0
	}
	return int(n)
}

// StringVector reads a vector<ustring>. Null reads as nil, empty as a
// non-nil empty slice.
func (d *Decoder) StringVector() []string {
	n := d.VectorLen(4)
	if n < 0 || d.err != nil {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = d.UString()
	}
	if d.err != nil {
		return nil
	}
	return v
}

// Encoder appends jute primitives to a byte slice.
type Encoder struct {
	buf []byte
	err error
}

// NewEncoder returns an Encoder that appends to dst.
func NewEncoder(dst []byte) *Encoder { return &Encoder{buf: dst} }

// Reset makes e append to dst, forgetting any error.
func (e *Encoder) Reset(dst []byte) { *e = Encoder{buf: dst} }

// Bytes returns everything appended so far, including dst's original bytes.
func (e *Encoder) Bytes() []byte { return e.buf }

// Len returns len(e.Bytes()).
func (e *Encoder) Len() int { return len(e.buf) }

// Err returns the first error met, or nil. Only records that can be built
// wrongly (a multi result of an unknown type) set it.
func (e *Encoder) Err() error { return e.err }

// Fail records err as the encoder's error unless one is already recorded.
func (e *Encoder) Fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// Int32 appends a jute int.
func (e *Encoder) Int32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }

// Int64 appends a jute long.
func (e *Encoder) Int64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }

// Bool appends a jute boolean.
func (e *Encoder) Bool(v bool) {
	var b byte
	if v {
		b = 1
	}
	e.buf = append(e.buf, b)
}

// Buffer appends a jute buffer; nil is written as null (-1).
func (e *Encoder) Buffer(b []byte) {
	if b == nil {
		e.Int32(-1)
		return
	}
	e.writeLen(len(b))
	e.buf = append(e.buf, b...)
}

// UString appends a jute ustring. Go strings cannot be null, so "" is
// written as an empty string, never as -1.
func (e *Encoder) UString(s string) {
	e.writeLen(len(s))
	e.buf = append(e.buf, s...)
}

// VectorLen appends a vector's element count.
func (e *Encoder) VectorLen(n int) { e.writeLen(n) }

// StringVector appends a vector<ustring>; nil is written as empty.
func (e *Encoder) StringVector(v []string) {
	e.writeLen(len(v))
	for _, s := range v {
		e.UString(s)
	}
}

func (e *Encoder) writeLen(n int) {
	if n > math.MaxInt32 {
		e.Fail(fmt.Errorf("jute: length %d does not fit an int32: %w", n, ErrInvalidLength))
		n = 0
	}
	e.Int32(int32(n))
}

// BeginFrame appends a placeholder length prefix and returns its offset, to
// be passed to EndFrame once the frame's records are appended. It lets a
// server encode several replies into one write buffer without copying.
func (e *Encoder) BeginFrame() int {
	start := len(e.buf)
	e.buf = append(e.buf, 0, 0, 0, 0)
	return start
}

// EndFrame fills in the length prefix that BeginFrame reserved at start.
func (e *Encoder) EndFrame(start int) {
	binary.BigEndian.PutUint32(e.buf[start:], uint32(len(e.buf)-start-4))
}

// Marshal appends r to dst.
func Marshal(dst []byte, r Record) ([]byte, error) {
	e := Encoder{buf: dst}
	r.Encode(&e)
	return e.buf, e.err
}

// Unmarshal decodes r from b. Bytes after the record are ignored, as
// ZooKeeper ignores them.
func Unmarshal(b []byte, r Record) error {
	d := Decoder{buf: b, maxLen: defaultMaxFieldLength}
	r.Decode(&d)
	return d.err
}
