package jute

import "testing"

// BenchmarkDecodeGetDataRequest decodes the body of the most common read; the
// path string is its only allocation.
func BenchmarkDecodeGetDataRequest(b *testing.B) {
	body, _ := Marshal(nil, &RequestHeader{Xid: 12345, Type: OpGetData})
	body, _ = Marshal(body, &GetDataRequest{Path: "/janus/bench/node-0000000042", Watch: true})
	var (
		d   Decoder
		hdr RequestHeader
		req GetDataRequest
	)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d.Reset(body)
		hdr.Decode(&d)
		req.Decode(&d)
		if d.Err() != nil {
			b.Fatal(d.Err())
		}
	}
}

// BenchmarkEncodeGetDataResponse encodes a whole reply frame into a reused
// buffer, as a connection's writer would.
func BenchmarkEncodeGetDataResponse(b *testing.B) {
	data := make([]byte, 256)
	hdr := ReplyHeader{Xid: 12345, Zxid: 0x100000042}
	resp := GetDataResponse{Data: data, Stat: sampleStat}
	var e Encoder
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		e.Reset(buf[:0])
		start := e.BeginFrame()
		hdr.Encode(&e)
		resp.Encode(&e)
		e.EndFrame(start)
		buf = e.Bytes()
	}
	b.SetBytes(int64(len(buf)))
}
