package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/store"
)

// stateFile names, inside DataDir, the Badger directory that holds the
// current state. A snapshot restore fills a new directory and then
// switches this file (write, fsync, rename, fsync the dir), so a crash
// leaves either the old state or the complete new one, never a mix.
const (
	stateFile       = "STATE"
	defaultStateDir = "state"
)

// stateRef is one open store and the readers still using it.
type stateRef struct {
	st    *store.Store
	dir   string // base name inside DataDir
	views sync.WaitGroup
}

func (m *Member) storeConfig(dir string) store.Config {
	return store.Config{
		Dir:      filepath.Join(m.cfg.DataDir, dir),
		Logger:   m.cfg.Logger.With("component", "store"),
		OnCommit: m.cfg.Observer.BackendCommitted,
	}
}

// openState opens the store STATE names and removes directories a crash
// during a restore left behind.
func (m *Member) openState() (*stateRef, error) {
	dir := defaultStateDir
	b, err := os.ReadFile(filepath.Join(m.cfg.DataDir, stateFile))
	switch {
	case err == nil:
		dir = strings.TrimSpace(string(b))
		if dir == "" || strings.ContainsAny(dir, `/\`) || dir == ".." {
			return nil, fmt.Errorf("server: %s names %q, not a state directory", stateFile, dir)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("server: read %s: %w", stateFile, err)
	}
	entries, err := os.ReadDir(m.cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	for _, e := range entries {
		if name := e.Name(); e.IsDir() && name != dir && (name == defaultStateDir || strings.HasPrefix(name, defaultStateDir+"-")) {
			m.log.Warn("removing a state directory no longer in use", "dir", name)
			if err := os.RemoveAll(filepath.Join(m.cfg.DataDir, name)); err != nil {
				return nil, fmt.Errorf("server: remove stale state %s: %w", name, err)
			}
		}
	}
	st, err := store.Open(m.storeConfig(dir))
	if err != nil {
		return nil, fmt.Errorf("server: open state: %w", err)
	}
	return &stateRef{st: st, dir: dir}, nil
}

// Snapshot implements zab.Snapshotter: the leader streams its state to a
// member too far behind for a DIFF.
func (s *stateMachine) Snapshot(w io.Writer) (uint64, error) {
	ref, _ := s.m.current()
	return ref.st.WriteSnapshot(w)
}

// Restore implements zab.Snapshotter. The snapshot goes into a fresh
// store beside the current one; once it is complete and synced, STATE is
// switched to it and the member starts serving it. The old store is closed
// when its last reader is done. Watchers are ended with
// core.ErrHubReplaced (the snapshot carries no event history, so they
// could not be resumed gap-free from it) and leases and the reaper's
// candidates are reloaded from the new state.
func (s *stateMachine) Restore(r io.Reader) error {
	m := s.m
	dir := fmt.Sprintf("%s-%d", defaultStateDir, time.Now().UnixNano())
	st, err := store.Open(m.storeConfig(dir))
	if err != nil {
		return fmt.Errorf("server: open state for restore: %w", err)
	}
	fail := func(err error) error {
		st.Close()
		os.RemoveAll(filepath.Join(m.cfg.DataDir, dir))
		return err
	}
	if err := st.RestoreSnapshot(r); err != nil {
		return fail(fmt.Errorf("server: restore snapshot: %w", err))
	}
	if _, err := st.Sync(); err != nil {
		return fail(fmt.Errorf("server: sync restored state: %w", err))
	}
	if err := m.switchStateFile(dir); err != nil {
		return fail(err)
	}
	ref := &stateRef{st: st, dir: dir}
	hub := core.NewHub(history{st}, st.Rev(), 0)
	m.mu.Lock()
	old, oldHub := m.state, m.hub
	m.state, m.hub = ref, hub
	m.mu.Unlock()
	oldHub.Replaced()
	if err := m.loadAlarms(ref); err != nil {
		return fmt.Errorf("server: reload alarms after restore: %w", err)
	}
	if err := m.lessor.reload(st); err != nil {
		return fmt.Errorf("server: reload leases after restore: %w", err)
	}
	if err := m.reaper.load(st); err != nil {
		return fmt.Errorf("server: reload reaper after restore: %w", err)
	}
	m.log.Info("state replaced by a snapshot", "applied", st.AppliedIndex(), "rev", st.Rev(), "dir", dir)
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		old.views.Wait()
		if err := old.st.Close(); err != nil {
			m.log.Warn("close replaced state", "err", err)
		}
		if err := os.RemoveAll(filepath.Join(m.cfg.DataDir, old.dir)); err != nil {
			m.log.Warn("remove replaced state", "dir", old.dir, "err", err)
		}
	}()
	return nil
}

// switchStateFile durably points STATE at dir.
func (m *Member) switchStateFile(dir string) error {
	tmp := filepath.Join(m.cfg.DataDir, stateFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("server: write %s: %w", stateFile, err)
	}
	_, err = f.WriteString(dir + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(m.cfg.DataDir, stateFile))
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(m.cfg.DataDir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("server: switch %s to %s: %w", stateFile, dir, err)
	}
	return nil
}
