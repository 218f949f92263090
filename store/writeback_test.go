package store

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/januskv/janus/core"
)

// TestWritebackKicksTheFilesBadgerWrites writes through a store whose
// writeback loop records what it kicks instead of kicking it: the loop
// must name the value log file and the memtable log Badger is writing
// (the newest of each, after a value log file rotated), and nothing after
// Close.
func TestWritebackKicksTheFilesBadgerWrites(t *testing.T) {
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
	want := newestLogs(dir)
	if len(want) != 2 || !strings.HasSuffix(want[0], ".vlog") || strings.HasSuffix(want[0], "000001.vlog") || !strings.HasSuffix(want[1], ".mem") {
		t.Fatalf("the newest logs are %v, want a rotated value log file and a memtable log", want)
	}
	waitFor := func(name string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			ok := slices.Contains(kicked, name)
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s, which Badger is writing, was never kicked", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, p := range want {
		waitFor(filepath.Base(p))
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
