package zkapi

import "sync"

// outQueue holds a connection's encoded frames until its writer sends them.
// It is unbounded so that the watch manager never waits for a slow client;
// a client that lets more than maxQueued bytes pile up is cut off instead.
type outQueue struct {
	mu     sync.Mutex
	frames [][]byte
	bytes  int
	done   bool // no more frames will be accepted
	wake   chan struct{}
}

// maxQueued bounds the bytes waiting for one connection's writer.
const maxQueued = 64 << 20

func newOutQueue() *outQueue { return &outQueue{wake: make(chan struct{}, 1)} }

// push queues a frame. It returns false if the queue is finished or the
// client has fallen too far behind; the caller then closes the connection.
func (q *outQueue) push(frame []byte) bool {
	q.mu.Lock()
	if q.done || q.bytes+len(frame) > maxQueued {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, frame)
	q.bytes += len(frame)
	q.mu.Unlock()
	q.signal()
	return true
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

// take waits for frames and returns them all; last is true once the queue
// is finished and drained.
func (q *outQueue) take(stop <-chan struct{}) (frames [][]byte, last bool) {
	for {
		q.mu.Lock()
		frames, q.frames, q.bytes = q.frames, nil, 0
		done := q.done
		q.mu.Unlock()
		if len(frames) > 0 {
			return frames, false
		}
		if done {
			return nil, true
		}
		select {
		case <-q.wake:
		case <-stop:
			return nil, true
		}
	}
}
