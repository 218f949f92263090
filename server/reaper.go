package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/store"
)

// reaper deletes empty containers and expired TTL nodes, as ZooKeeper's
// ContainerManager does: a container once it has had children and has
// none left, a TTL node once it is childless and unmodified for its TTL.
//
// It has the lessor's owner: only the leader runs it (followRoles starts
// and stops it with the leadership), so one member proposes each delete,
// fenced to the epoch it decided in. Every member keeps the set of
// candidates (see reapSet), so a new leader starts reaping at once. The
// reaper belongs to the member, not to the ZooKeeper face: whatever faces
// a member serves, the nodes ZooKeeper clients made are reaped.
type reaper struct {
	clock func() time.Time
	// read is the latest state; propose proposes op as the leader of
	// epoch (fenced to it).
	read    func(ctx context.Context) (core.ReadView, error)
	propose func(ctx context.Context, epoch uint32, op *core.Op) (*core.Result, error)
	log     *slog.Logger

	candidates reapSet

	mu sync.Mutex
	// proposed counts the deletes this member's reaper has proposed, by
	// the epoch of the leadership they were fenced to.
	proposed map[uint32]uint64
}

func newReaper(clock func() time.Time, read func(context.Context) (core.ReadView, error),
	propose func(context.Context, uint32, *core.Op) (*core.Result, error), log *slog.Logger) *reaper {
	return &reaper{clock: clock, read: read, propose: propose, log: log}
}

// run reaps every interval, as the leader of epoch, until ctx ends.
func (r *reaper) run(ctx context.Context, every time.Duration, epoch uint32) {
	runEvery(ctx, every, func() {
		// A pass that fails is tried again next round while this member
		// leads; a lost leadership is followRoles's to act on.
		err := r.reapOnce(ctx, epoch)
		if err != nil && ctx.Err() == nil && !errors.Is(err, core.ErrLeaderChanged) {
			r.log.Warn("container/TTL reaper pass failed", "err", err)
		}
	})
}

func (r *reaper) reapOnce(ctx context.Context, epoch uint32) error {
	victims, err := r.due(ctx, r.clock().UnixMilli())
	if err != nil {
		return err
	}
	for _, n := range victims {
		// The expected version makes the delete lose any race with a
		// write; a child added meanwhile makes it fail with NotEmpty.
		op := &core.Op{Txn: &core.Txn{Success: []core.TxnOp{{
			Kind: core.OpDelete, Key: n.Key, ExpectedVersion: int32(n.Version - 1),
		}}}}
		r.mu.Lock()
		if r.proposed == nil {
			r.proposed = map[uint32]uint64{}
		}
		r.proposed[epoch]++
		r.mu.Unlock()
		if _, err := r.propose(ctx, epoch, op); err != nil {
			return err
		}
	}
	return nil
}

// due finds the nodes due for removal at time now (ms).
func (r *reaper) due(ctx context.Context, now int64) ([]*core.Node, error) {
	v, err := r.read(ctx)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	var victims []*core.Node
	for _, p := range r.candidates.paths() {
		n, err := v.Node([]byte(p))
		if err != nil {
			return nil, err
		}
		if n == nil || n.Mode == core.ModePersistent {
			continue // deleted (or replaced) after the view; see observe
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

// reapSet holds the paths of the containers and TTL nodes, so the reaper
// looks at those instead of scanning every node each pass (which cost most
// of a core once the tree held a few hundred thousand nodes). It is loaded
// from the state when the member opens it or restores a snapshot, and kept
// up by every batch the member applies after that: a path is added when a
// container or TTL node is written there and dropped when it is deleted.
// Both happen where the member applies, so no batch falls between a load
// and the batches observed.
type reapSet struct {
	mu  sync.Mutex
	set map[string]struct{}
}

// load replaces the candidates with the containers and TTL nodes of st,
// which the member has opened or restored and applies nothing to yet.
func (r *reaper) load(st *store.Store) error {
	v, err := st.Latest()
	if err != nil {
		return err
	}
	defer v.Close()
	return r.candidates.load(v)
}

// load replaces the set with the containers and TTL nodes of v.
func (r *reapSet) load(v core.View) error {
	set := map[string]struct{}{}
	err := v.Range([]byte("/"), []byte("0"), func(n *core.Node) bool {
		if n.Mode != core.ModePersistent && core.IsTreePath(n.Key) {
			set[string(n.Key)] = struct{}{}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("find containers and TTL nodes: %w", err)
	}
	r.mu.Lock()
	r.set = set
	r.mu.Unlock()
	return nil
}

// observe follows the containers and TTL nodes the applied batches write
// and delete.
func (r *reapSet) observe(batches []*core.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range batches {
		for _, ev := range b.Events {
			if ev.Node == nil {
				continue
			}
			// A deleted node, an implicit parent and a persistent node
			// are no candidates, whatever the path held before.
			if ev.Type == core.EventDelete || ev.Implicit || ev.Node.Mode == core.ModePersistent {
				delete(r.set, string(ev.Node.Key))
				continue
			}
			if r.set == nil {
				r.set = map[string]struct{}{}
			}
			r.set[string(ev.Node.Key)] = struct{}{}
		}
	}
}

// paths returns the candidates in path order.
func (r *reapSet) paths() []string {
	r.mu.Lock()
	out := make([]string, 0, len(r.set))
	for p := range r.set {
		out = append(out, p)
	}
	r.mu.Unlock()
	slices.Sort(out)
	return out
}
