package diskspace

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/januskv/janus/internal/testenv"
)

// fakeDisk is a file system whose free space a test sets and whose
// statfs calls it counts.
type fakeDisk struct {
	free  int64
	err   error
	stats int
}

func (d *fakeDisk) stat(string) (int64, error) {
	d.stats++
	return d.free, d.err
}

// A Gauge spares the statfs only far from the threshold and within
// Interval, and refuses only on a fresh reading.
func TestGaugeReadsOnlyWhenItMustAndRefusesOnlyOnAFreshReading(t *testing.T) {
	const gib = 1 << 30
	const reserve = 128 << 20
	disk := &fakeDisk{free: 10 * gib}
	clock := time.Unix(1000, 0)
	g := NewGauge("/data")
	g.stat = disk.stat
	g.now = func() time.Time { return clock }

	steps := []struct {
		name      string
		advance   time.Duration
		setFree   int64 // 0 leaves the disk as it is
		wantStats int   // statfs calls so far
		wantErr   error
	}{
		{name: "first call reads", wantStats: 1},
		{name: "far from the threshold, within the interval: no read", wantStats: 1},
		{name: "another process fills the disk: trusted until the interval ends", setFree: reserve - 10, wantStats: 1},
		{name: "interval over: read, refused", advance: Interval, wantStats: 2, wantErr: unix.ENOSPC},
		{name: "a refusal is never trusted: read again", wantStats: 3, wantErr: unix.ENOSPC},
		{name: "space freed: admitted at once", setFree: 10 * gib, wantStats: 4},
		{name: "near the threshold every call reads", advance: Interval, setFree: reserve + Margin, wantStats: 5},
		{name: "and again", wantStats: 6},
		{name: "far again: read, since the last reading was near", setFree: 10 * gib, wantStats: 7},
		{name: "trusted", advance: Interval / 2, wantStats: 7},
	}
	for _, s := range steps {
		clock = clock.Add(s.advance)
		if s.setFree != 0 {
			disk.free = s.setFree
		}
		err := g.Check(reserve)
		if (s.wantErr == nil) != (err == nil) || (s.wantErr != nil && !errors.Is(err, s.wantErr)) {
			t.Fatalf("%s: Check = %v, want %v", s.name, err, s.wantErr)
		}
		if disk.stats != s.wantStats {
			t.Fatalf("%s: %d statfs calls, want %d", s.name, disk.stats, s.wantStats)
		}
	}

	// A failed statfs is returned and never trusted.
	disk.err = fmt.Errorf("statfs: %w", unix.ENOENT)
	clock = clock.Add(Interval)
	if err := g.Check(reserve); !Unwritable(err) {
		t.Fatalf("statfs failing: %v, want ENOENT", err)
	}
	disk.err = nil
	if err := g.Check(reserve); err != nil || disk.stats != 9 {
		t.Fatalf("after a failed statfs: %v with %d reads, want nil with 9", err, disk.stats)
	}
}

// On a real file system a Gauge answers as Check does.
func TestGaugeOnATmpfs(t *testing.T) {
	mnt := testenv.MountTmpfs(t, 4<<20)
	g := NewGauge(mnt)
	if err := g.Check(1 << 20); err != nil {
		t.Fatalf("empty 4 MiB tmpfs, 1 MiB reserve: %v", err)
	}
	if err := g.Check(5 << 20); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("4 MiB tmpfs, 5 MiB reserve: %v, want ENOSPC", err)
	}
}
