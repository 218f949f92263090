package store

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Badger retries a failed memtable flush every second, for ever, and its
// Close waits for the flush: with its directory gone (or read-only, or
// without room for a table file) a SIGTERM never ended the process. Close
// now returns ErrFlushStuck as soon as Badger reports the failed flush.
func TestCloseReturnsWhenBadgerCannotFlush(t *testing.T) {
	h := newHarness(t, 1)
	h.step(50) // something in the memtable for Close to flush
	if err := os.Rename(h.dir, h.dir+".gone"); err != nil {
		t.Fatal(err)
	}
	err := h.s.Close()
	h.s = nil // Badger's flusher is left retrying; nothing more to close
	if !errors.Is(err, ErrFlushStuck) {
		t.Fatalf("Close with the directory gone: %v, want ErrFlushStuck", err)
	}
	if want := "read-only, full or gone"; !strings.Contains(err.Error(), want) {
		t.Fatalf("Close gave up by its timeout, not on Badger's report of the failed flush: %v", err)
	}
}
