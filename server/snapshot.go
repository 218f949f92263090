package server

import (
	"fmt"
	"io"

	"github.com/januskv/janus/backup"
)

// WriteSnapshot streams a consistent copy of the member's latest state to
// w as an etcd v3.7 backend file (backup.WriteEtcdFile: etcdutl restores
// it into an etcd data directory, `janus snapshot restore` into a Janus
// one) and returns the applied index it is a copy of. It reads a snapshot
// view and never blocks writers; the etcd face serves it as
// Maintenance.Snapshot. The file is built in the data directory first.
func (m *Member) WriteSnapshot(w io.Writer) (uint64, error) {
	m.mu.RLock()
	ref := m.state
	ref.views.Add(1)
	m.mu.RUnlock()
	defer ref.views.Done()
	v, err := ref.st.Latest()
	if err != nil {
		return 0, fmt.Errorf("server: snapshot: %w", err)
	}
	defer v.Close()
	applied, err := backup.WriteEtcdFile(w, v, m.cfg.DataDir)
	if err != nil {
		return 0, fmt.Errorf("server: snapshot: %w", err)
	}
	return applied, nil
}
