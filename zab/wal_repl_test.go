package zab

import (
	"log/slog"
	"testing"
)

func walEntries(first uint64, epoch uint32, counter uint32, n int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		out[i] = Entry{Index: first + uint64(i), Zxid: MakeZxid(epoch, counter+uint32(i)), Time: int64(first) + int64(i),
			Origin: 2, ReqID: uint64(i), Data: []byte{byte(i)}}
	}
	return out
}

func openTestWAL(t *testing.T, dir string) *wal {
	t.Helper()
	w, err := openWAL(osFS{}, dir, slog.New(slog.DiscardHandler), 300)
	if err != nil {
		t.Fatal(err)
	}
	if w.segmentCount() == 0 {
		err = w.reset(1)
	} else {
		err = w.resume()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.close() })
	return w
}

// The zxid runs map index to zxid and back, survive a reopen, and follow
// truncation and trimming; truncation keeps proposer fields intact.
func TestWALZxidRunsTruncateAndTrim(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir)
	for _, batch := range [][]Entry{walEntries(1, 1, 1, 5), walEntries(6, 2, 1, 5), walEntries(11, 4, 1, 5)} {
		if err := w.append(batch); err != nil {
			t.Fatal(err)
		}
	}
	check := func(w *wal) {
		t.Helper()
		for _, tc := range []struct {
			zxid  uint64
			index uint64
		}{
			{MakeZxid(1, 3), 3}, {MakeZxid(1, 99), 5}, {MakeZxid(2, 1), 6}, {MakeZxid(3, 7), 10}, {MakeZxid(4, 5), 15}, {MakeZxid(9, 0), 15},
		} {
			if got, ok := w.indexAtOrBelow(tc.zxid); !ok || got != tc.index {
				t.Errorf("indexAtOrBelow(%s) = %d, %v; want %d", FormatZxid(tc.zxid), got, ok, tc.index)
			}
		}
		if z, ok := w.zxidAt(12); !ok || z != MakeZxid(4, 2) {
			t.Errorf("zxidAt(12) = %s, %v", FormatZxid(z), ok)
		}
	}
	check(w)
	w.close()
	w = openTestWAL(t, dir)
	check(w)

	if err := w.truncateAfter(7); err != nil {
		t.Fatal(err)
	}
	if w.lastIndex != 7 || w.lastZxid != MakeZxid(2, 2) {
		t.Fatalf("after truncate: last %d %s", w.lastIndex, FormatZxid(w.lastZxid))
	}
	if err := w.append(walEntries(8, 5, 1, 3)); err != nil {
		t.Fatal(err)
	}
	w.close()
	w = openTestWAL(t, dir)
	var got []Entry
	if err := w.read(1, 10, 100, func(b []Entry) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[6].Zxid != MakeZxid(2, 2) || got[7].Zxid != MakeZxid(5, 1) || got[7].Origin != 2 || got[9].ReqID != 2 {
		t.Fatalf("log after truncate and append: %+v", got)
	}
	if _, err := w.trimThrough(6); err != nil {
		t.Fatal(err)
	}
	b := w.baseOf()
	if b.index == 0 || b.index > 6 {
		t.Fatalf("base after trim %+v", b)
	}
	if z, ok := w.zxidAt(b.index); !ok || z != got[b.index-1].Zxid {
		t.Fatalf("base zxid %s, %v; want %s", FormatZxid(z), ok, FormatZxid(got[b.index-1].Zxid))
	}
	w.close()
	w = openTestWAL(t, dir)
	if nb := w.baseOf(); nb != b {
		t.Fatalf("base after reopen %+v, want %+v", nb, b)
	}
	if _, ok := w.indexAtOrBelow(MakeZxid(1, 0)); ok {
		t.Fatal("indexAtOrBelow found a zxid in trimmed history")
	}
	if err := w.resetAt(logBase{index: 40, zxid: MakeZxid(7, 9)}); err != nil {
		t.Fatal(err)
	}
	w.close()
	w = openTestWAL(t, dir)
	if w.lastIndex != 40 || w.lastZxid != MakeZxid(7, 9) {
		t.Fatalf("after resetAt and reopen: last %d %s", w.lastIndex, FormatZxid(w.lastZxid))
	}
}
