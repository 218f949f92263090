package migrate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/translate"
)

// Following a ZooKeeper source.
//
// ZooKeeper's change stream is a persistent recursive watch (addWatch,
// 3.6+): one registration, and every create, delete and data change at or
// below the path is notified until the session ends. A notification names
// the path and the kind of change, not the new data, so the follower reads
// the path again, on the watch's own session, and makes the target match
// what it reads: present and persistent, it is created or overwritten;
// absent, it and everything below it is deleted on the target. Because the
// read comes after the event on the same session, it sees that change or a
// later one, and the last read of each path is at least as new as its last
// change: once the source stops changing and the reported paths are
// applied, the target equals the source.
//
// The watch is set before the source is listed, so a change made during
// the listing is either seen by it or notified after it. When the session's
// connection breaks the follower does not try to resume it: it opens a new
// session, sets the watch again and re-lists both sides, which finds every
// change the lost session would have notified (deletes included, as nodes
// only the target has). ACL changes fire no watch in ZooKeeper; a re-list
// and the cut-over's verification see them.

// openStream opens a session on the source for reading it and, with watch,
// sets the persistent recursive watch before anything is listed.
func (m *zkMigration) openStream(ctx context.Context, watch bool) error {
	if m.dirty == nil {
		m.dirty = newDirtySet(time.Now)
		m.cfg.State.setPending(m.dirty.pending)
	}
	m.dirty.reset()
	s, err := dialZKStream(ctx, m.cfg.From.Hosts, m.cfg.DialTimeout, m.dirty.add)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	for _, a := range m.cfg.Auth {
		if err := s.addAuth(ctx, a); err != nil {
			s.close()
			return fmt.Errorf("source: add %s identity: %w", a.Scheme, err)
		}
	}
	if !watch {
		m.stream = s
		return nil
	}
	if err := s.addWatch(ctx, m.root()); err != nil {
		s.close()
		return fmt.Errorf("source: persistent recursive watch on %s (needs ZooKeeper 3.6 or later): %w", m.root(), err)
	}
	m.stream = s
	return nil
}

func (m *zkMigration) closeStream() {
	if m.stream != nil {
		m.stream.close()
		m.stream = nil
	}
}

// reader reads the source through the change stream's session when there
// is one, so reads are ordered after the events they answer.
func (m *zkMigration) reader(ctx context.Context) zkReader {
	if m.stream != nil {
		return streamReader{ctx: ctx, s: m.stream}
	}
	return m.src
}

// follow applies the source's changes until ctx ends, then cuts over:
// waits until everything the source held at that moment is applied.
// With Config.Cutover it cuts over at once.
func (m *zkMigration) follow(ctx context.Context, rep *Report) error {
	status := &statusPrinter{out: m.cfg.Out, state: m.cfg.State}
	tick := time.NewTicker(m.cfg.StatusEvery)
	defer tick.Stop()
	// Source reads and target writes must not be cut half way by the
	// interrupt that asks for the cut-over.
	wctx := context.WithoutCancel(ctx)
	cutover := ctx.Done()
	if m.cfg.Cutover {
		closed := make(chan struct{})
		close(closed)
		cutover = closed
	}
	for {
		if m.stream == nil {
			if err := m.reconnect(ctx, wctx, rep); err != nil {
				return err
			}
			continue
		}
		err := m.applyDirty(wctx, rep)
		if err == nil {
			select {
			case <-m.dirty.wake:
				continue
			case <-tick.C:
				status.print(false)
				continue
			case <-m.stream.Done():
				err = m.stream.Err()
			case <-cutover:
				err = m.catchUp(wctx, rep)
				if err == nil {
					m.cfg.State.update(func(s *FollowStatus) { s.CaughtUp = true })
					status.print(true)
					return nil
				}
			}
		}
		if m.stream.Err() == nil {
			return err // the target failed, or the source refused a read
		}
		fmt.Fprintf(m.cfg.Out, "lost the source's change stream (%v); re-listing\n", err)
		m.closeStream()
	}
}

// catchUp applies every change the source had applied when it was called.
func (m *zkMigration) catchUp(ctx context.Context, rep *Report) error {
	bctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	err := m.stream.barrier(bctx, m.root())
	cancel()
	if err != nil {
		return fmt.Errorf("source: sync: %w", err)
	}
	return m.applyDirty(ctx, rep)
}

// reconnect opens a new change stream and re-lists, retrying while the
// source is unreachable until ctx ends.
func (m *zkMigration) reconnect(ctx, wctx context.Context, rep *Report) error {
	for {
		err := m.openStream(wctx, true)
		if err == nil {
			m.cfg.State.update(func(s *FollowStatus) { s.Resyncs++ })
			sub := Report{quiet: true}
			if err = m.resync(wctx, &sub); err == nil {
				fmt.Fprintf(m.cfg.Out, "re-synced: %d nodes written, %d deleted on the target, %d ephemerals skipped\n", sub.Copied, sub.Deleted, len(sub.Skipped))
				rep.Deleted += sub.Deleted
				return nil
			}
			if m.stream.Err() == nil {
				return err
			}
			m.closeStream()
		}
		fmt.Fprintf(m.cfg.Out, "source unreachable (%v); retrying\n", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cut-over impossible: the source is unreachable: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// applyDirty applies every reported path: up to walkParallel at a time
// are read from the source at once, then written in the order they were
// reported.
func (m *zkMigration) applyDirty(ctx context.Context, rep *Report) error {
	prog := &progress{out: m.cfg.Out, every: m.cfg.ProgressEvery, what: "followed events:", n: rep.Followed}
	for {
		paths := m.dirty.next(walkParallel)
		if len(paths) == 0 {
			return nil
		}
		reads := make([]sourceRead, len(paths))
		var wg sync.WaitGroup
		for i, p := range paths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reads[i] = m.readSource(ctx, p)
			}()
		}
		wg.Wait()
		for i, p := range paths {
			if err := m.applyRead(ctx, p, reads[i], 0); err != nil {
				return err
			}
		}
		n := m.dirty.done()
		rep.Followed += n
		prog.add(n)
		m.cfg.State.update(func(s *FollowStatus) { s.Applied += int64(n) })
	}
}

// sourceRead is a source node as the follower read it: gone (or
// ephemeral, which the target must not have either), outside the copy, or
// a node to copy.
type sourceRead struct {
	n    znode
	gone bool
	skip bool
	err  error
}

// readSource reads p's data and ACL from the source.
func (m *zkMigration) readSource(ctx context.Context, p string) sourceRead {
	if translate.IsReserved([]byte(p)) || !m.inTree(p) {
		return sourceRead{skip: true}
	}
	r := m.reader(ctx)
	data, st, err := r.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return sourceRead{gone: true}
	}
	if err != nil {
		return sourceRead{err: fmt.Errorf("source: get %s: %w", p, err)}
	}
	if isEphemeral(st.EphemeralOwner) {
		// The path may have held a persistent node the target has.
		return sourceRead{gone: true}
	}
	acl, _, err := r.GetACL(p)
	if errors.Is(err, zk.ErrNoNode) {
		return sourceRead{gone: true}
	}
	if err != nil {
		return sourceRead{err: fmt.Errorf("source: get ACL of %s: %w", p, err)}
	}
	if m.dstZK != nil {
		if err := checkACLReadable(p, acl); err != nil {
			return sourceRead{err: fmt.Errorf("source: %w", err)}
		}
	}
	return sourceRead{n: znode{path: p, data: data, acl: acl}}
}

// maxDepth bounds applyRead's walk up to missing ancestors (ZooKeeper paths
// are at most about 1 MiB long, so the bound is only against a loop).
const maxDepth = 1 << 16

// applyRead makes the target's node at p what the source held when read.
func (m *zkMigration) applyRead(ctx context.Context, p string, r sourceRead, depth int) error {
	switch {
	case r.err != nil:
		return r.err
	case r.skip:
		return nil
	case r.gone:
		return m.removeTree(ctx, p)
	}
	err := m.putNode(ctx, r.n)
	if errors.Is(err, zk.ErrNoNode) && depth < maxDepth {
		// The target lacks the parent: the source's create of it was
		// notified, but read when the parent was gone again. It exists
		// now (its child does), so copy it first.
		parent := parentPath(p)
		if err := m.applyRead(ctx, parent, m.readSource(ctx, parent), depth+1); err != nil {
			return err
		}
		err = m.putNode(ctx, r.n)
	}
	if err != nil {
		return fmt.Errorf("target: write %s: %w", p, err)
	}
	return nil
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return core.RootPath
	}
	return p[:i]
}

// inTree reports whether p is the followed subtree's root or below it.
func (m *zkMigration) inTree(p string) bool {
	root := m.root()
	return root == core.RootPath || p == root || strings.HasPrefix(p, root+"/")
}

// putNode makes n the target's node: on a ZooKeeper target a create with
// its ACL (one commit), or, when it exists, its data and then its ACL
// (ZooKeeper's multi has no setACL).
func (m *zkMigration) putNode(ctx context.Context, n znode) error {
	if m.dstEtcd != nil {
		_, err := m.dstEtcd.Put(ctx, n.path, string(n.data))
		return err
	}
	if n.path == core.RootPath {
		_, err := m.dstZK.Set(n.path, n.data, -1)
		return err
	}
	_, err := m.dstZK.Create(n.path, n.data, zk.FlagPersistent, n.acl)
	if errors.Is(err, zk.ErrNodeExists) {
		if _, err = m.dstZK.Set(n.path, n.data, -1); err == nil {
			_, err = m.dstZK.SetACL(n.path, n.acl, -1)
		}
	}
	return err
}

// removeTree deletes p and everything below it on the target.
func (m *zkMigration) removeTree(ctx context.Context, p string) error {
	if p == core.RootPath {
		return nil
	}
	if m.dstEtcd != nil {
		_, err := m.dstEtcd.Txn(ctx).Then(clientv3.OpDelete(p), clientv3.OpDelete(p+"/", clientv3.WithPrefix())).Commit()
		if err != nil {
			return fmt.Errorf("target: delete %s: %w", p, err)
		}
		return nil
	}
	kids, _, err := m.dstZK.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("target: children of %s: %w", p, err)
	}
	for _, k := range kids {
		if err := m.removeTree(ctx, string(core.JoinPath([]byte(p), []byte(k)))); err != nil {
			return err
		}
	}
	if err := m.dstZK.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("target: delete %s: %w", p, err)
	}
	return nil
}

// nodeSum is what a re-list or a verification keeps of a node to compare
// it: a hash of its data and its ACL, "" for the open ACL most nodes have,
// so that a million of them fit in a few hundred MB.
type nodeSum struct {
	data [sha256.Size]byte
	acl  string
}

func summarize(n znode) nodeSum {
	s := nodeSum{data: sha256.Sum256(n.data)}
	if !isOpenACL(n.acl) {
		s.acl = aclString(n.acl)
	}
	return s
}

func (s nodeSum) aclString() string {
	if s.acl == "" {
		return aclString(zk.WorldACL(zk.PermAll))
	}
	return s.acl
}

// resync makes the target's subtree equal to the source's as listed now:
// nodes missing or different on the target are written, nodes only the
// target has are deleted. It holds one small summary per target node, not
// the data.
func (m *zkMigration) resync(ctx context.Context, rep *Report) error {
	have := map[string]nodeSum{}
	if err := m.walkTarget(ctx, func(n znode) error {
		have[n.path] = summarize(n)
		return nil
	}); err != nil {
		return fmt.Errorf("target: list: %w", err)
	}
	return m.copyFrom(ctx, m.reader(ctx), rep, func(n znode) (write, bool) {
		s, ok := have[n.path]
		if !ok {
			return writeCreate, m.dstZK != nil && !isOpenACL(n.acl)
		}
		delete(have, n.path)
		w := writeNone
		if s.data != sha256.Sum256(n.data) {
			w = writeSet
		}
		return w, m.dstZK != nil && s.acl != summarize(n).acl
	}, func() error {
		extra := make([]string, 0, len(have))
		for p := range have {
			extra = append(extra, p)
		}
		// Children sort after their parent; deleting in reverse order
		// deletes them first.
		slices.Sort(extra)
		for i := len(extra) - 1; i >= 0; i-- {
			if err := m.removeTree(ctx, extra[i]); err != nil {
				return err
			}
			rep.Deleted++
		}
		return nil
	})
}

// walkTarget visits the target's nodes of the copied subtree.
func (m *zkMigration) walkTarget(ctx context.Context, fn func(znode) error) error {
	if m.dstZK != nil {
		return walkZK(ctx, m.dstZK, m.root(), func(n znode) error {
			if isEphemeral(n.owner) {
				return nil
			}
			if err := checkACLReadable(n.path, n.acl); err != nil {
				return fmt.Errorf("target: %w", err)
			}
			return fn(n)
		})
	}
	r := treeRange(m.root())
	_, err := pageEtcd(ctx, m.dstEtcd, r, 0, func(kvs []*mvccpb.KeyValue) error {
		for _, kv := range kvs {
			if kv.Lease != 0 || translate.IsReserved(kv.Key) {
				continue
			}
			if err := fn(znode{path: string(kv.Key), data: kv.Value, acl: zk.WorldACL(zk.PermAll)}); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}
