package diskspace

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A Gauge answers Check for one directory without a statfs per call.
// A member's admission asks it for every client write, and a statfs each
// time was 7-8% of the server's CPU per write. The Gauge trusts its last
// reading while it is younger than Interval and more than Margin above
// the threshold. Anything closer to the threshold, and every refusal, is
// decided on a fresh statfs: a disk within a Margin of its reserve is read
// on every call, as before, and a write is admitted again as soon as
// space is freed. What is written within one Interval (by this process or
// another) must fit in the Margin: 10 GB/s.
type Gauge struct {
	dir  string
	now  func() time.Time
	stat func(dir string) (int64, error)

	mu    sync.Mutex
	valid bool
	at    time.Time
	free  int64 // bytes free for an unprivileged writer at the reading
}

const (
	// Interval is how long a Gauge trusts a reading.
	Interval = 100 * time.Millisecond
	// Margin is how far above the threshold a reading must be for the
	// Gauge to trust it.
	Margin = 1 << 30
)

// NewGauge returns a Gauge of dir's file system.
func NewGauge(dir string) *Gauge {
	return &Gauge{dir: dir, now: time.Now, stat: statFree}
}

// Check is the package's Check, for no bytes more, of the Gauge's
// directory: nil if the file system is writable and keeps more than
// reserve bytes free.
func (g *Gauge) Check(reserve int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if g.valid && now.Sub(g.at) < Interval && g.free-reserve > Margin {
		return nil
	}
	free, err := g.stat(g.dir)
	if err != nil {
		g.valid = false
		return err
	}
	g.valid, g.at, g.free = true, now, free
	return compare(g.dir, free, reserve, 0)
}

// statFree returns the bytes dir's file system has free for an
// unprivileged writer, or an error wrapping EROFS if it is read-only.
func statFree(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return 0, fmt.Errorf("%s: %w", dir, unix.EROFS)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
