package diskspace

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A Gauge answers Check for one directory without a statfs per call. A
// member checks before every write it admits and logs, and a statfs each
// time was 8-11% of the server's CPU per write (two per write at 10-15k
// writes a second). The Gauge keeps the last reading and counts the bytes
// the writes it passed said they need; a later call trusts that reading
// less the bytes counted while it is younger than Interval and more than
// Margin above the threshold. Anything closer to the threshold, and every
// refusal, is decided on a fresh statfs: a disk within a Margin of its
// reserve is read on every call, as before, and a write is admitted again
// as soon as space is freed. What another process writes within one
// Interval must fit in the Margin (10 GB/s).
type Gauge struct {
	dir  string
	now  func() time.Time
	stat func(dir string) (int64, error)

	mu      sync.Mutex
	valid   bool
	at      time.Time
	free    int64 // bytes free for an unprivileged writer at the reading
	counted int64 // bytes passed writes said they need since the reading
}

const (
	// Interval is how long a Gauge trusts a reading.
	Interval = 100 * time.Millisecond
	// Margin is how far above the threshold a Gauge's estimate must be
	// for it to trust its reading.
	Margin = 1 << 30
)

// NewGauge returns a Gauge of dir's file system.
func NewGauge(dir string) *Gauge {
	return &Gauge{dir: dir, now: time.Now, stat: statFree}
}

// Check is the package's Check for the Gauge's directory: nil if the file
// system is writable and keeps more than reserve bytes free after need
// more. A nil answer counts need against the reading it relied on.
func (g *Gauge) Check(reserve, need int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if g.valid && now.Sub(g.at) < Interval && g.free-g.counted-need-reserve > Margin {
		g.counted += need
		return nil
	}
	free, err := g.stat(g.dir)
	if err != nil {
		g.valid = false
		return err
	}
	g.valid, g.at, g.free, g.counted = true, now, free, 0
	if err := compare(g.dir, free, reserve, need); err != nil {
		return err
	}
	g.counted = need
	return nil
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
