package zkapi

import (
	"bytes"
	"errors"
	"testing"

	"github.com/januskv/janus/zkapi/jute"
)

// The queue keeps frames in the order they were queued, encoded and
// pushed alike, hands them out in one buffer, and reuses that buffer once
// it is given back.
func TestOutQueueBatchesFramesInOrder(t *testing.T) {
	q := newOutQueue()
	reply := func(xid int32) func(e *jute.Encoder) {
		return func(e *jute.Encoder) {
			(&jute.ReplyHeader{Xid: xid, Zxid: 7}).Encode(e)
			(&jute.GetDataResponse{Data: []byte("value")}).Encode(e)
		}
	}
	size, ok, err := q.encode(reply(1), false)
	if err != nil || !ok {
		t.Fatalf("encode: %v, %v", ok, err)
	}
	if want := 16 + 4 + 5 + jute.StatSize; size != want {
		t.Errorf("frame body size %d, want %d", size, want)
	}
	if !q.push([]byte("raw")) {
		t.Fatal("push refused")
	}
	if _, ok, err := q.encode(reply(2), false); err != nil || !ok {
		t.Fatalf("encode: %v, %v", ok, err)
	}
	buf, n, last := q.take(nil)
	if n != 3 || last {
		t.Fatalf("take: %d frames, last %v; want 3, false", n, last)
	}
	var want []byte
	for _, f := range [][]byte{frame(t, reply(1)), []byte("raw"), frame(t, reply(2))} {
		want = append(want, f...)
	}
	if !bytes.Equal(buf, want) {
		t.Fatalf("batch\n%x\nwant\n%x", buf, want)
	}
	q.written(buf)
	if _, ok, _ := q.encode(reply(3), true); !ok {
		t.Fatal("encode refused")
	}
	again, n, _ := q.take(nil)
	if n != 1 || &again[0] != &buf[0] {
		t.Errorf("second batch: %d frames, reused the given-back buffer: %v", n, &again[0] == &buf[0])
	}
	if !bytes.Equal(again, frame(t, reply(3))) {
		t.Errorf("second batch %x", again)
	}
}

// An encoding error leaves what was queued intact; a finished queue and a
// client too far behind refuse frames.
func TestOutQueueRefusals(t *testing.T) {
	q := newOutQueue()
	q.push([]byte("a"))
	bad := errors.New("bad record")
	if _, ok, err := q.encode(func(e *jute.Encoder) { e.Int32(1); e.Fail(bad) }, false); !errors.Is(err, bad) || !ok {
		t.Fatalf("failing encode: ok %v, err %v", ok, err)
	}
	buf, n, _ := q.take(nil)
	if n != 1 || string(buf) != "a" {
		t.Fatalf("after a failed encode: %q (%d frames), want just \"a\"", buf, n)
	}
	q.written(buf)
	if q.push(make([]byte, maxQueued+1)) {
		t.Error("a frame beyond maxQueued was accepted")
	}
	if _, ok, _ := q.encode(func(e *jute.Encoder) { e.Buffer(make([]byte, maxQueued)) }, false); ok {
		t.Error("an encoded frame beyond maxQueued was accepted")
	}
	q.finish()
	if q.push([]byte("late")) {
		t.Error("a finished queue accepted a frame")
	}
	if _, _, last := q.take(nil); !last {
		t.Error("a finished, drained queue did not say last")
	}
}

// One batch is written at a time: while the writer goroutine writes one,
// the replier cannot claim the next (it would overtake), and the frames
// wait for the writer, which is woken when its batch is written.
func TestOutQueueOneWriterAtATime(t *testing.T) {
	q := newOutQueue()
	q.push([]byte("1"))
	buf, n, _ := q.take(nil)
	if n != 1 {
		t.Fatalf("take: %d frames", n)
	}
	q.push([]byte("2"))
	if _, _, ok := q.claim(); ok {
		t.Fatal("claimed a batch while another was being written")
	}
	// Drain the wake-ups so far; written must send a fresh one.
	select {
	case <-q.wake:
	default:
	}
	q.written(buf)
	select {
	case <-q.wake:
	default:
		t.Fatal("frames queued during a write did not wake the writer")
	}
	got, n, ok := q.claim()
	if !ok || n != 1 || string(got) != "2" {
		t.Fatalf("claim after the write: %q (%d frames), %v", got, n, ok)
	}
	if _, _, ok := q.claim(); ok {
		t.Fatal("claimed twice")
	}
	q.written(got)
	if _, _, ok := q.claim(); ok {
		t.Fatal("claimed an empty queue")
	}
}

func frame(t *testing.T, fn func(e *jute.Encoder)) []byte {
	t.Helper()
	e := jute.NewEncoder(nil)
	start := e.BeginFrame()
	fn(e)
	e.EndFrame(start)
	return e.Bytes()
}
