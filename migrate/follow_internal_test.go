package migrate

import (
	"slices"
	"testing"
	"time"

	"github.com/januskv/janus/zkapi/jute"
)

// TestDirtySet checks the follower's queue with a fake clock: paths kept
// once in first-reported order, in-flight paths still counted as lag, a
// path reported again while in flight applied again.
func TestDirtySet(t *testing.T) {
	now := time.Unix(1000, 0)
	d := newDirtySet(func() time.Time { return now })
	ev := func(p string) { d.add(jute.WatcherEvent{Type: jute.EventNodeDataChanged, Path: p}) }
	pending := func(wantN int, wantLag time.Duration) {
		t.Helper()
		if n, lag := d.pending(); n != wantN || lag != wantLag {
			t.Errorf("pending = %d events, %v; want %d, %v", n, lag, wantN, wantLag)
		}
	}

	pending(0, 0)
	ev("/a")
	now = now.Add(time.Second)
	ev("/b")
	ev("/a") // again before it was applied: kept once, counted twice
	now = now.Add(time.Second)
	ev("/c")
	pending(4, 2*time.Second)

	if got := d.next(2); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Fatalf("next(2) = %q", got)
	}
	pending(4, 2*time.Second) // in flight still counts
	now = now.Add(time.Second)
	ev("/a") // changed again while being applied
	if n := d.done(); n != 3 {
		t.Errorf("done covered %d events, want 3", n)
	}
	pending(2, time.Second) // /c (oldest, 1s) and /a again (0s)
	if got := d.next(10); !slices.Equal(got, []string{"/c", "/a"}) {
		t.Fatalf("next(10) = %q", got)
	}
	d.done()
	pending(0, 0)
	if got := d.next(10); len(got) != 0 {
		t.Errorf("next on an empty set = %q", got)
	}

	ev("/x")
	d.reset()
	pending(0, 0)
}
