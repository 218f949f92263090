package jute

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestEncoderPrimitives(t *testing.T) {
	tests := []struct {
		name   string
		encode func(e *Encoder)
		want   string
	}{
		{"int32", func(e *Encoder) { e.Int32(-2) }, "fffffffe"},
		{"int64", func(e *Encoder) { e.Int64(0x0102030405060708) }, "0102030405060708"},
		{"bool true", func(e *Encoder) { e.Bool(true) }, "01"},
		{"bool false", func(e *Encoder) { e.Bool(false) }, "00"},
		{"null buffer", func(e *Encoder) { e.Buffer(nil) }, "ffffffff"},
		{"empty buffer", func(e *Encoder) { e.Buffer([]byte{}) }, "00000000"},
		{"buffer", func(e *Encoder) { e.Buffer([]byte{0xde, 0xad}) }, "00000002 dead"},
		{"empty ustring", func(e *Encoder) { e.UString("") }, "00000000"},
		{"ustring", func(e *Encoder) { e.UString("/é") }, "00000003 2fc3a9"},
		{"nil vector", func(e *Encoder) { e.StringVector(nil) }, "00000000"},
		{"vector", func(e *Encoder) { e.StringVector([]string{"a", ""}) }, "00000002 00000001 61 00000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEncoder([]byte{0x99})
			tc.encode(e)
			want := append([]byte{0x99}, unhex(t, tc.want)...)
			if !bytes.Equal(e.Bytes(), want) {
				t.Fatalf("got %x, want %x", e.Bytes(), want)
			}
		})
	}
}

func TestDecoderPrimitives(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		decode  func(d *Decoder) any
		want    any
		wantErr error
	}{
		{"int32", "fffffffe", func(d *Decoder) any { return d.Int32() }, int32(-2), nil},
		{"int64", "0102030405060708", func(d *Decoder) any { return d.Int64() }, int64(0x0102030405060708), nil},
		{"bool any non-zero byte is true", "02", func(d *Decoder) any { return d.Bool() }, true, nil},
		{"bool zero", "00", func(d *Decoder) any { return d.Bool() }, false, nil},
		{"null buffer", "ffffffff", func(d *Decoder) any { return d.Buffer() }, []byte(nil), nil},
		{"empty buffer", "00000000", func(d *Decoder) any { return d.Buffer() }, []byte{}, nil},
		{"buffer", "00000002 dead", func(d *Decoder) any { return d.Buffer() }, []byte{0xde, 0xad}, nil},
		{"null ustring reads empty", "ffffffff", func(d *Decoder) any { return d.UString() }, "", nil},
		{"ustring", "00000002 2f61", func(d *Decoder) any { return d.UString() }, "/a", nil},
		{"null vector", "ffffffff", func(d *Decoder) any { return d.StringVector() }, []string(nil), nil},
		{"empty vector", "00000000", func(d *Decoder) any { return d.StringVector() }, []string{}, nil},
		{"short int32", "000000", func(d *Decoder) any { return d.Int32() }, int32(0), ErrTruncated},
		{"short int64", "00000000000000", func(d *Decoder) any { return d.Int64() }, int64(0), ErrTruncated},
		{"empty bool", "", func(d *Decoder) any { return d.Bool() }, false, ErrTruncated},
		{"buffer length -2", "fffffffe", func(d *Decoder) any { return d.Buffer() }, []byte(nil), ErrInvalidLength},
		{"buffer past end", "00000003 0102", func(d *Decoder) any { return d.Buffer() }, []byte(nil), ErrTruncated},
		{"ustring huge length", "7fffffff 00", func(d *Decoder) any { return d.UString() }, "", ErrInvalidLength},
		{"vector count -2", "fffffffe", func(d *Decoder) any { return d.StringVector() }, []string(nil), ErrInvalidLength},
		// A count the input cannot hold fails before anything is allocated.
		{"vector count past end", "7fffffff 00000000", func(d *Decoder) any { return d.StringVector() }, []string(nil), ErrTruncated},
		{"vector element past end", "00000002 00000001 61 000000", func(d *Decoder) any { return d.StringVector() }, []string(nil), ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(unhex(t, tc.input))
			got := tc.decode(d)
			if !errors.Is(d.Err(), tc.wantErr) || (tc.wantErr == nil) != (d.Err() == nil) {
				t.Fatalf("err = %v, want %v", d.Err(), tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestDecoderErrorIsSticky(t *testing.T) {
	d := NewDecoder(unhex(t, "0000000000000007 00000005 01"))
	d.Int64()
	d.Buffer() // announces 5 bytes, has 1
	if !errors.Is(d.Err(), ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", d.Err())
	}
	off := d.Offset()
	if v := d.Int32(); v != 0 {
		t.Errorf("Int32 after error = %d, want 0", v)
	}
	if d.Offset() != off {
		t.Errorf("offset moved from %d to %d after an error", off, d.Offset())
	}
	first := d.Err()
	d.Fail(errors.New("second"))
	if d.Err() != first {
		t.Errorf("Fail replaced the first error %v with %v", first, d.Err())
	}
}

func TestDecoderMaxLength(t *testing.T) {
	in := unhex(t, "00000004 61626364")
	d := NewDecoder(in)
	d.SetMaxLength(3)
	if s := d.UString(); s != "" || !errors.Is(d.Err(), ErrInvalidLength) {
		t.Fatalf("UString over limit = %q, %v; want \"\", ErrInvalidLength", s, d.Err())
	}
	d.Reset(in) // keeps the limit, forgets the error
	d.SetMaxLength(4)
	if s := d.UString(); s != "abcd" || d.Err() != nil {
		t.Fatalf("UString at limit = %q, %v", s, d.Err())
	}
}

func TestDecodedBufferHasNoSpareCapacity(t *testing.T) {
	in := unhex(t, "00000001 61 62")
	b := NewDecoder(in).Buffer()
	_ = append(b, 'X')
	if in[5] != 0x62 {
		t.Fatalf("appending to a decoded buffer overwrote the input")
	}
}

func TestEncoderRejectsOverlongLength(t *testing.T) {
	e := NewEncoder(nil)
	e.VectorLen(1 << 31)
	if !errors.Is(e.Err(), ErrInvalidLength) {
		t.Fatalf("err = %v, want ErrInvalidLength", e.Err())
	}
}
