package zkapi

import (
	"slices"
	"sync"
	"time"

	"github.com/januskv/janus/core"
)

// reap deletes empty containers and expired TTL nodes every ReaperInterval
// until Close, as ZooKeeper's ContainerManager does: a container once it
// has had children and has none left, a TTL node once it is childless and
// unmodified for its TTL.
func (s *Server) reap() {
	t := time.NewTicker(s.cfg.ReaperInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if err := s.reapOnce(); err != nil && s.ctx.Err() == nil {
			s.log.Warn("container/TTL reaper pass failed", "err", err)
		}
	}
}

func (s *Server) reapOnce() error {
	victims, err := s.reapCandidates(s.cfg.Clock().UnixMilli())
	if err != nil {
		return err
	}
	for _, n := range victims {
		// The expected version makes the delete lose any race with a
		// write; a child added meanwhile makes it fail with NotEmpty.
		op := &core.Op{Txn: &core.Txn{Success: []core.TxnOp{{
			Kind: core.OpDelete, Key: n.Key, ExpectedVersion: int32(n.Version - 1),
		}}}, Origin: core.OriginZooKeeper}
		if _, err := s.backend.Propose(s.ctx, op); err != nil {
			return err
		}
	}
	return nil
}

// reapSet holds the paths that may be containers or TTL nodes, so the
// reaper looks at those instead of scanning every node each pass (which
// cost most of a core once the tree held a few hundred thousand nodes). It
// is seeded by one full scan and kept up by the event stream; a path in it
// may be stale, never missing: each pass re-reads every candidate.
type reapSet struct {
	mu     sync.Mutex
	paths  map[string]struct{}
	seeded bool
}

// observe adds the containers and TTL nodes an applied revision wrote.
// Deleted paths are dropped by the next pass that finds them gone.
func (r *reapSet) observe(evs []core.Event) {
	for _, ev := range evs {
		if ev.Type != core.EventPut || ev.Implicit || ev.Node == nil || ev.Node.Mode == core.ModePersistent {
			continue
		}
		r.mu.Lock()
		if r.paths == nil {
			r.paths = map[string]struct{}{}
		}
		r.paths[string(ev.Node.Key)] = struct{}{}
		r.mu.Unlock()
	}
}

func (r *reapSet) snapshot() (paths []string, seeded bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.paths {
		paths = append(paths, p)
	}
	return paths, r.seeded
}

func (r *reapSet) drop(path string) {
	r.mu.Lock()
	delete(r.paths, path)
	r.mu.Unlock()
}

// seed records every container and TTL node of a full scan.
func (r *reapSet) seed(paths []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paths == nil {
		r.paths = map[string]struct{}{}
	}
	for _, p := range paths {
		r.paths[p] = struct{}{}
	}
	r.seeded = true
}

// reapCandidates finds the nodes due for removal at time now (ms).
func (s *Server) reapCandidates(now int64) ([]*core.Node, error) {
	v, err := s.backend.Read(s.ctx, 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	paths, seeded := s.reapable.snapshot()
	if !seeded {
		// Once, at the first pass: every container and TTL node already
		// stored. Later ones arrive through the event stream.
		var found []string
		err := v.Range([]byte("/"), []byte("0"), func(n *core.Node) bool {
			if n.Mode != core.ModePersistent && core.IsTreePath(n.Key) {
				found = append(found, string(n.Key))
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		s.reapable.seed(found)
		paths, _ = s.reapable.snapshot()
	}
	slices.Sort(paths)
	var victims []*core.Node
	for _, p := range paths {
		n, err := v.Node([]byte(p))
		if err != nil {
			return nil, err
		}
		if n == nil || n.Mode == core.ModePersistent {
			s.reapable.drop(p)
			continue
		}
		d, err := v.Dir(n.Key)
		if err != nil {
			return nil, err
		}
		empty := d == nil || d.NumChildren == 0
		switch n.Mode {
		case core.ModeContainer:
			if empty && d != nil && d.Cversion > 0 {
				victims = append(victims, n)
			}
		case core.ModeTTL:
			if empty && n.TTL > 0 && now-n.Mtime > n.TTL {
				victims = append(victims, n)
			}
		}
	}
	return victims, nil
}
