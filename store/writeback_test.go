package store

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/januskv/janus/core"
)

// TestWritebackKicksTheValueLogBadgerWrites writes through a store whose
// writeback loop records what it kicks instead of kicking it: the loop
// must name the value log file Badger is writing (the newest, after one
// rotated), never a memtable log, and nothing after Close.
func TestWritebackKicksTheValueLogBadgerWrites(t *testing.T) {
	var mu sync.Mutex
	var kicked []string
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, MemTableSize: 1 << 20, valueLogFileSize: 1 << 20,
		writebackEvery: time.Millisecond,
		writebackKick: func(path string) error {
			mu.Lock()
			defer mu.Unlock()
			kicked = append(kicked, filepath.Base(path))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var index uint64
	value := bytes.Repeat([]byte("v"), 4096) // in the value log
	for i := range 600 {                     // 2.4 MB: the value log rotates twice
		applyOne(t, s, &index, core.TxnOp{Kind: core.OpPut, Key: []byte{'k', byte(i), byte(i >> 8)}, Value: value})
	}
	want := newestValueLog(dir)
	if filepath.Ext(want) != ".vlog" || filepath.Base(want) == "000001.vlog" {
		t.Fatalf("the newest value log file is %q, want one after a rotation", want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		ok := slices.Contains(kicked, filepath.Base(want))
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, which Badger is writing, was never kicked", want)
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(kicked)
	mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(kicked) != n {
		t.Fatalf("%d kicks after Close", len(kicked)-n)
	}
	for _, name := range kicked {
		if filepath.Ext(name) != ".vlog" {
			t.Fatalf("kicked %s: only value log files are", name)
		}
	}
}

// TestStartWritebackOfAFile runs the system's own kick on a file: it
// must not fail on a file with dirty pages, nor block on one.
func TestStartWritebackOfAFile(t *testing.T) {
	kick := osWritebackKick()
	if kick == nil {
		t.Skip("no way to start writeback on this system")
	}
	path := filepath.Join(t.TempDir(), "000001.vlog")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := kick(path); err != nil {
		t.Fatalf("kick %s: %v", path, err)
	}
	if err := kick(filepath.Join(t.TempDir(), "gone.vlog")); err == nil {
		t.Fatal("kicking a missing file succeeded")
	}
}
