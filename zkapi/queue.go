package zkapi

import (
	"sync"

	"github.com/januskv/janus/zkapi/jute"
)

// outQueue holds a connection's encoded frames until its writer sends them.
// Replies and notifications are encoded straight into one byte buffer, so
// a reply costs no allocation of its own and a batch of them goes out in
// one write; the writer hands the buffer it sent back for the next batch.
// The queue is unbounded so that the watch manager never waits for a slow
// client; a client that lets more than maxQueued bytes pile up is cut off
// instead.
type outQueue struct {
	mu     sync.Mutex
	buf    []byte // frames waiting for the writer
	frames int    // how many frames buf holds
	spare  []byte // an empty buffer the writer gave back
	enc    jute.Encoder
	done   bool // no more frames will be accepted
	// writing says a batch is being written (by the writer goroutine or
	// by the replier, see claim): one writer at a time keeps the frames
	// in order.
	writing bool
	wake    chan struct{}
}

// maxQueued bounds the bytes waiting for one connection's writer.
const maxQueued = 64 << 20

// maxSpare is the largest buffer the writer keeps for the next batch; a
// larger one (a batch with a large value) goes back to the collector.
const maxSpare = 256 << 10

func newOutQueue() *outQueue { return &outQueue{wake: make(chan struct{}, 1)} }

// encode appends one frame, whose records fn appends to e, and returns the
// size of its body. ok is false if the queue is finished or the client
// has fallen too far behind: the caller then closes the connection. An
// encoding error leaves the queue as it was. With wake set the writer is
// told at once; otherwise the frame waits for the next flush or wake.
func (q *outQueue) encode(fn func(e *jute.Encoder), wake bool) (size int, ok bool, err error) {
	q.mu.Lock()
	if q.done {
		q.mu.Unlock()
		return 0, false, nil
	}
	q.enc.Reset(q.buf)
	start := q.enc.BeginFrame()
	fn(&q.enc)
	q.enc.EndFrame(start)
	b := q.enc.Bytes()
	if err := q.enc.Err(); err != nil {
		q.buf = b[:start]
		q.enc.Reset(nil)
		q.mu.Unlock()
		return 0, true, err
	}
	q.enc.Reset(nil)
	if len(b) > maxQueued {
		q.buf = b[:start]
		q.mu.Unlock()
		return 0, false, nil
	}
	q.buf = b
	q.frames++
	q.mu.Unlock()
	if wake {
		q.signal()
	}
	return len(b) - start - 4, true, nil
}

// push queues a frame that is already encoded (length prefix included).
// It returns false if the queue is finished or the client has fallen too
// far behind; the caller then closes the connection.
func (q *outQueue) push(frame []byte) bool {
	q.mu.Lock()
	if q.done || len(q.buf)+len(frame) > maxQueued {
		q.mu.Unlock()
		return false
	}
	q.buf = append(q.buf, frame...)
	q.frames++
	q.mu.Unlock()
	q.signal()
	return true
}

// claim hands the frames waiting, as one buffer holding n frames, to a
// caller that writes them itself, unless nothing waits or another batch
// is being written. The caller must call written with buf afterwards.
func (q *outQueue) claim() (buf []byte, n int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.writing || q.frames == 0 {
		return nil, 0, false
	}
	buf, n = q.takeLocked()
	return buf, n, true
}

// takeLocked hands out the waiting frames and marks a batch as being
// written.
func (q *outQueue) takeLocked() (buf []byte, n int) {
	buf, n = q.buf, q.frames
	q.buf, q.spare, q.frames = q.spare, nil, 0
	q.writing = true
	return buf, n
}

// written ends the write of a batch that claim or take handed out and
// takes its buffer back for reuse. If frames arrived meanwhile (or the
// queue finished), the writer goroutine is woken for them.
func (q *outQueue) written(buf []byte) {
	q.mu.Lock()
	q.writing = false
	if cap(buf) <= maxSpare {
		if len(q.buf) == 0 && cap(q.buf) < cap(buf) {
			q.buf = buf[:0] // nothing queued since: fill this one next
		} else {
			q.spare = buf[:0]
		}
	}
	wake := q.frames > 0 || q.done
	q.mu.Unlock()
	if wake {
		q.signal()
	}
}

// finish accepts no more frames; the writer sends what is queued and stops.
func (q *outQueue) finish() {
	q.mu.Lock()
	q.done = true
	q.mu.Unlock()
	q.signal()
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take waits for frames and returns them all, as one buffer holding n
// frames; last is true once the queue is finished and drained. The caller
// calls written with buf once it is written.
func (q *outQueue) take(stop <-chan struct{}) (buf []byte, n int, last bool) {
	for {
		q.mu.Lock()
		if !q.writing {
			if q.frames > 0 {
				buf, n = q.takeLocked()
				q.mu.Unlock()
				return buf, n, false
			}
			if q.done {
				q.mu.Unlock()
				return nil, 0, true
			}
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-stop:
			return nil, 0, true
		}
	}
}
