package server

import (
	"fmt"
	"io"
)

// WriteSnapshot streams a consistent copy of the member's latest state to w,
// in the store's snapshot format, and returns the applied index it is a
// copy of. It reads a snapshot view and never blocks writers; the etcd
// face serves it as Maintenance.Snapshot.
func (m *Member) WriteSnapshot(w io.Writer) (uint64, error) {
	m.mu.RLock()
	ref := m.state
	ref.views.Add(1)
	m.mu.RUnlock()
	defer ref.views.Done()
	applied, err := ref.st.WriteSnapshot(w)
	if err != nil {
		return 0, fmt.Errorf("server: snapshot: %w", err)
	}
	return applied, nil
}
