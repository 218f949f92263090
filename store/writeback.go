package store

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Badger writes its memtable logs and value log files through memory maps
// and leaves their dirty pages to the kernel: the store does not have it
// fsync writes (see badgerOptions). Two of Badger's own calls then wait for
// all of those pages at once, where every write waits with them. When a
// value log file is full, Badger's single write goroutine msyncs the whole
// file before it starts the next one (logFile.doneWriting, then
// MmapFile.Truncate's Sync): with 64 MiB files every write stopped for about
// 100 ms each time, a put round's p99.9 and max. And DB.Sync, which
// Store.Sync calls on every trim, msyncs the active memtable log while it
// holds the lock the write goroutine takes to switch memtables.
//
// So a store keeps asking the kernel to start writing back the newest value
// log file and memtable log, a little at a time: the waits above then find
// few dirty pages. Starting writeback makes nothing durable (Sync still
// does that, and the crash tests hold any subset of pages written) and
// waits for nothing.
type writeback struct {
	dir   string
	every time.Duration
	// kick starts writeback of the dirty pages of the file at path and
	// returns without waiting for it.
	kick func(path string) error
	stop chan struct{}
	done chan struct{}
}

// writebackInterval is how often the newest files are kicked: at the
// project's put rate about a megabyte of each is dirtied in between.
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
		for _, path := range newestLogs(w.dir) {
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

// newestLogs returns the newest value log file and the newest memtable log
// in dir: the ones Badger is writing. Badger names both by a zero-padded
// number, so the newest sorts last.
func newestLogs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var vlog, mem string
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasSuffix(name, ".vlog") && name > vlog:
			vlog = name
		case strings.HasSuffix(name, ".mem") && name > mem:
			mem = name
		}
	}
	var out []string
	for _, name := range []string{vlog, mem} {
		if name != "" {
			out = append(out, filepath.Join(dir, name))
		}
	}
	return out
}
