package store

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Badger writes its value log files through memory maps and leaves their
// dirty pages to the kernel: the store does not have it fsync writes (see
// badgerOptions). When a value log file is full, Badger's single write
// goroutine msyncs the whole file before it starts the next one
// (logFile.doneWriting, then MmapFile.Truncate's Sync), and every write
// waits with it: with 64 MiB files, about 100 ms each time, a put round's
// p99.9 and max.
//
// So a store keeps asking the kernel to start writing back the value log
// file Badger is writing, a little at a time: the msync then finds few
// dirty pages. Starting writeback makes nothing durable (Sync still does
// that, and the crash tests hold any subset of pages written) and waits for
// nothing. The memtable logs are left to the kernel: most of a memtable
// log's pages are never written back at all, since the file is deleted
// once its memtable is a table, seconds later; kicking them too wrote all
// of them and cost a tenth of a create workload's throughput.
type writeback struct {
	dir   string
	every time.Duration
	// kick starts writeback of the dirty pages of the file at path and
	// returns without waiting for it.
	kick func(path string) error
	stop chan struct{}
	done chan struct{}
}

// writebackInterval is how often the newest value log file is kicked: at
// the project's put rate about half a megabyte is dirtied in between.
const writebackInterval = 100 * time.Millisecond

// startWriteback starts the loop over Badger's directory dir, unless kick
// is nil (no way to start writeback on this system). stopWriteback ends it.
func startWriteback(dir string, every time.Duration, kick func(string) error) *writeback {
	if kick == nil {
		return nil
	}
	w := &writeback{dir: dir, every: every, kick: kick, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *writeback) run() {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if path := newestValueLog(w.dir); path != "" {
			// A file Badger deleted meanwhile, or a directory a restore
			// replaced, is not an error: the next tick looks again.
			_ = w.kick(path)
		}
	}
}

// stopWriteback stops w and waits for its loop to end; w may be nil.
func (w *writeback) stopWriteback() {
	if w == nil {
		return
	}
	close(w.stop)
	<-w.done
}

// newestValueLog returns the newest value log file in dir, the one Badger
// is writing, or "" if there is none. Badger names its value log files by
// a zero-padded number, so the newest sorts last.
func newestValueLog(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var newest string
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".vlog") && name > newest {
			newest = name
		}
	}
	if newest == "" {
		return ""
	}
	return filepath.Join(dir, newest)
}
