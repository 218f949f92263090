package zab

import (
	"slices"
	"testing"
	"time"
)

// Entries handed to the log writer in many small batches, while it is
// writing, all reach the disk in order; durable never names an entry that
// is not readable back, and close stops the writer.
func TestLogWriterAppendsEverythingHandedOverInOrder(t *testing.T) {
	w := openTestWAL(t, t.TempDir())
	lw := newLogWriter(w, 0, nil, time.Second)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		lw.run()
	}()
	const n = 500
	want := walEntries(1, 1, 1, n)
	for i := 0; i < n; i += 7 {
		lw.enqueue(want[i:min(i+7, n)])
	}
	var durable uint64
	for durable < n {
		<-lw.done
		d, err := lw.state()
		if err != nil {
			t.Fatal(err)
		}
		if d < durable {
			t.Fatalf("durable went back from %d to %d", durable, d)
		}
		durable = d
		var got []Entry
		if err := w.read(1, durable, 64, func(b []Entry) error { got = append(got, b...); return nil }); err != nil {
			t.Fatalf("read through durable index %d: %v", durable, err)
		}
		if !slices.EqualFunc(got, want[:durable], sameEntry) {
			t.Fatalf("log through %d differs from what was handed over", durable)
		}
	}
	lw.close()
	<-stopped
}

func sameEntry(a, b Entry) bool {
	return a.Index == b.Index && a.Zxid == b.Zxid && a.Time == b.Time && a.Origin == b.Origin &&
		a.ReqID == b.ReqID && string(a.Data) == string(b.Data)
}
