package server

import (
	"context"
	"fmt"
	"time"
)

// defaultReclaimInterval is how often a member rewrites value log files
// that deletes and compactions turned mostly into garbage (Badger never
// does it on its own).
const defaultReclaimInterval = 5 * time.Minute

// runReclaim rewrites garbage value log files every interval until ctx
// ends. Each member does it for its own disk; it changes no state.
func (m *Member) runReclaim(ctx context.Context, interval time.Duration) {
	runEvery(ctx, interval, func() {
		ref, done := m.holdState()
		n, err := ref.st.ReclaimValueLog()
		done()
		switch {
		case err != nil:
			m.log.Warn("value log GC", "err", err)
		case n > 0:
			m.log.Info("value log GC", "files_rewritten", n)
		}
	})
}

// holdState returns the state in use and keeps a restore from retiring it
// until done is called.
func (m *Member) holdState() (*stateRef, func()) {
	m.mu.RLock()
	ref := m.state
	ref.views.Add(1)
	m.mu.RUnlock()
	return ref, ref.views.Done
}

// Defragment implements core.Backend (etcd's defrag): it gives back the
// disk space this member's deletes and compactions freed, at once (see
// store.Store.Reclaim). Applying pauses while Badger flushes its
// memtables, as etcd's defrag pauses the member.
func (m *Member) Defragment(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ref, done := m.holdState()
	defer done()
	before, _ := ref.st.Status()
	start := time.Now()
	if err := ref.st.Reclaim(); err != nil {
		return fmt.Errorf("defragment: %w", err)
	}
	after, _ := ref.st.Status()
	m.log.Info("defragmented", "size_before", before.DBSize, "size_after", after.DBSize, "took", time.Since(start))
	return nil
}
