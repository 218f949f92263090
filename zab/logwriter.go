package zab

import "sync"

// logWriter appends a replica's entries to the log on its own goroutine,
// so that the protocol loop keeps receiving ACKs, sending COMMITs and
// forwarding while an fdatasync is in progress. Without it, each member
// could act on a message only between two fdatasyncs: a write waited for
// one at the leader before its ACKs were counted, for another before the
// COMMIT went out, and for one at each follower before the COMMIT was
// seen, so latency was several fdatasyncs deep instead of two.
//
// The loop hands over entries (enqueue) and learns what is durable from
// the done signal (durable); entries handed over while a write is in
// progress form the next group, with one fdatasync for all of them, as
// the single member's writer does. Nothing changes for the protocol: an
// entry counts as on this member's disk only once durable reports it.
//
// Operations that reshape the log (truncate, reset to a snapshot) and
// synchronous appends run on the loop only after drain, while the writer
// is idle; reads and zxid lookups may run beside it (wal allows that).
type logWriter struct {
	wal  *wal
	work chan struct{} // cap 1: something was queued, or stop
	done chan struct{} // cap 1: durable advanced or err was set

	mu      sync.Mutex
	queue   []Entry
	durable uint64 // last index on disk, as the writer last reported it
	err     error
	stop    bool
}

func newLogWriter(w *wal, durable uint64) *logWriter {
	return &logWriter{wal: w, durable: durable, work: make(chan struct{}, 1), done: make(chan struct{}, 1)}
}

// run is the writer goroutine. It returns after close, or after an append
// fails (the log's tail is then unknown and nothing more may be written).
func (lw *logWriter) run() {
	var batch []Entry
	for range lw.work {
		lw.mu.Lock()
		if lw.stop {
			lw.mu.Unlock()
			return
		}
		// The loop fills the other slice meanwhile; the entries were copied
		// in, so the buffer can be reused.
		batch, lw.queue = lw.queue, batch[:0]
		lw.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := lw.wal.append(batch)
		lw.mu.Lock()
		if err != nil {
			lw.err = err
		} else {
			lw.durable = batch[len(batch)-1].Index
		}
		lw.mu.Unlock()
		signal(lw.done)
		if err != nil {
			return
		}
		clear(batch) // drop references to payloads already written
		if cap(batch) > 1<<16 {
			batch = nil
		}
	}
}

// enqueue hands entries, which continue what was handed before, to the
// writer. It never blocks.
func (lw *logWriter) enqueue(ents []Entry) {
	lw.mu.Lock()
	lw.queue = append(lw.queue, ents...)
	lw.mu.Unlock()
	signal(lw.work)
}

// state returns the last index on disk and the writer's error, if any.
func (lw *logWriter) state() (uint64, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.durable, lw.err
}

// reset records that the loop changed the log itself (truncated it,
// restarted it at a snapshot, appended synchronously) while the writer was
// idle: index is now the last entry on disk.
func (lw *logWriter) reset(index uint64) {
	lw.mu.Lock()
	lw.durable = index
	lw.mu.Unlock()
}

// close stops the writer after the append in progress, if any; entries
// still queued are not written (none of them was acknowledged).
func (lw *logWriter) close() {
	lw.mu.Lock()
	lw.stop = true
	lw.mu.Unlock()
	signal(lw.work)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
