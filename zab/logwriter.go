package zab

import (
	"cmp"
	"slices"

	"github.com/januskv/janus/internal/diskspace"
	"sync"
	"time"
)

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
// progress form the next group, with one fdatasync for all of them.
// Nothing changes for the protocol: an
// entry counts as on this member's disk only once durable reports it.
//
// Operations that reshape the log (truncate, reset to a snapshot) and
// synchronous appends run on the loop only after drain, while the writer
// is idle; reads and zxid lookups may run beside it (wal allows that).
//
// A write the disk refuses for now (full or read-only, or check says so;
// see ErrNoSpace) is not an error: the writer keeps the entries, reports
// the condition (noSpaceErr) and tries again every retry until the disk
// takes them or the writer is closed. The entries were never acknowledged,
// so the ensemble goes on without this member meanwhile.
type logWriter struct {
	wal   *wal
	check func(need int64) error // nil: no check before a write
	retry time.Duration
	work  chan struct{} // cap 1: something was queued, or stop
	done  chan struct{} // cap 1: durable advanced or err was set
	quit  chan struct{} // closed by close
	// exited is closed when run returns: nothing more will be written.
	exited chan struct{}

	mu      sync.Mutex
	queue   []Entry
	durable uint64 // last index on disk, as the writer last reported it
	err     error
	noSpace error // why the last write was refused for want of disk
	// refused is why a lone leader last refused a proposal for want of
	// disk before it reached the log (see refuse); cleared, like noSpace,
	// by the next write that succeeds.
	refused error
	// advanced is closed, and replaced, whenever durable advances or err
	// is set (see waitDurable).
	advanced  chan struct{}
	stop      bool
	closeOnce sync.Once
}

func newLogWriter(w *wal, durable uint64, check func(int64) error, retry time.Duration) *logWriter {
	return &logWriter{wal: w, durable: durable, check: check, retry: retry,
		work: make(chan struct{}, 1), done: make(chan struct{}, 1), quit: make(chan struct{}),
		exited: make(chan struct{}), advanced: make(chan struct{})}
}

// run is the writer goroutine. It returns after close, or after an append
// fails (the log's tail is then unknown and nothing more may be written).
func (lw *logWriter) run() {
	defer close(lw.exited)
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
		err := lw.write(batch)
		if refusedForSpace(err) {
			lw.mu.Lock()
			if lw.noSpace == nil {
				lw.wal.logger.Warn("log disk full or read-only: refusing writes (NOSPACE), holding received entries until it takes them",
					"first_index", batch[0].Index, "err", err)
			}
			lw.noSpace = err
			// Back in front of whatever was queued meanwhile, in order.
			lw.queue = append(slices.Clone(batch), lw.queue...)
			lw.mu.Unlock()
			batch = batch[:0]
			select {
			case <-time.After(lw.retry):
				signal(lw.work)
				continue
			case <-lw.quit:
				return
			}
		}
		lw.mu.Lock()
		if err != nil {
			lw.err = err
		} else {
			lw.durable = batch[len(batch)-1].Index
			if was := cmp.Or(lw.noSpace, lw.refused); was != nil {
				lw.wal.logger.Warn("log disk takes writes again; NOSPACE cleared", "was", was.Error())
			}
			lw.noSpace, lw.refused = nil, nil
		}
		close(lw.advanced)
		lw.advanced = make(chan struct{})
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

// write asks check, then appends batch.
func (lw *logWriter) write(batch []Entry) error {
	if lw.check != nil {
		need := 0
		for _, e := range batch {
			need += len(e.Data)
		}
		if err := lw.check(int64(need)); err != nil {
			return &notWrittenError{err}
		}
	}
	return lw.wal.append(batch)
}

// noSpaceErr returns why the writer's last write was refused for want of
// disk (or why a lone leader last refused a proposal so), or nil.
func (lw *logWriter) noSpaceErr() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.noSpace != nil {
		return lw.noSpace
	}
	return lw.refused
}

// holding returns why the writer holds entries the disk refused, or nil.
func (lw *logWriter) holding() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.noSpace
}

// checkSpace asks check, for a lone leader, whether the log can take a
// proposal of need bytes before it enters the log; it records and returns
// the refusal (see ErrNoSpace). Nothing is then written, so the next
// proposal reuses the zxid.
func (lw *logWriter) checkSpace(need int) error {
	err := lw.fits(need)
	if err == nil {
		return nil
	}
	lw.mu.Lock()
	if lw.refused == nil && lw.noSpace == nil {
		lw.wal.logger.Warn("log disk full or read-only: refusing writes (NOSPACE) until it takes them again, still serving reads",
			"err", err)
	}
	lw.refused = err
	lw.mu.Unlock()
	return err
}

// fits asks check whether the log can take need bytes more, and returns
// why not if the disk is full, read-only or gone; any other failure to look
// is left to the writer's own check.
func (lw *logWriter) fits(need int) error {
	if lw.check == nil {
		return nil
	}
	err := lw.check(int64(need))
	if err == nil || !diskspace.Unwritable(err) {
		return nil
	}
	return err
}

// waitDurable waits until index is on disk. It fails with the writer's
// error, or with ErrStopped once the writer has exited without writing
// index.
func (lw *logWriter) waitDurable(index uint64) error {
	for {
		lw.mu.Lock()
		d, err, advanced := lw.durable, lw.err, lw.advanced
		lw.mu.Unlock()
		switch {
		case d >= index:
			return nil
		case err != nil:
			return err
		}
		select {
		case <-advanced:
		case <-lw.exited:
			lw.mu.Lock()
			d, err = lw.durable, lw.err
			lw.mu.Unlock()
			switch {
			case d >= index:
				return nil
			case err != nil:
				return err
			}
			return ErrStopped
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
	lw.closeOnce.Do(func() { close(lw.quit) })
	signal(lw.work)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
