package zkapi

import (
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
		}}}}
		if _, err := s.backend.Propose(s.ctx, op); err != nil {
			return err
		}
	}
	return nil
}

// reapCandidates scans the tree for nodes due for removal at time now (ms).
func (s *Server) reapCandidates(now int64) ([]*core.Node, error) {
	v, err := s.backend.Read(s.ctx, 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	var victims []*core.Node
	var scanErr error
	err = v.Range([]byte("/"), []byte("0"), func(n *core.Node) bool {
		if n.Mode == core.ModePersistent || !core.IsTreePath(n.Key) {
			return true
		}
		d, err := v.Dir(n.Key)
		if err != nil {
			scanErr = err
			return false
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
		return true
	})
	if err == nil {
		err = scanErr
	}
	return victims, err
}
