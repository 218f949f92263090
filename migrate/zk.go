package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/translate"
)

// isEphemeral reports whether a node with this ephemeralOwner belongs to a
// session. ZooKeeper reports 0 for persistent, container and TTL nodes
// alike (it hides the extended types' owner encoding from clients), so a
// client-side copy cannot tell those apart and writes them all persistent.
func isEphemeral(owner int64) bool { return owner != 0 }

// znode is one node read from a ZooKeeper tree.
type znode struct {
	path  string
	data  []byte
	acl   []zk.ACL
	owner int64
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// connectZK opens a session and waits until it is established.
func connectZK(ctx context.Context, hosts []string, timeout time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(hosts, timeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, fmt.Errorf("connect to ZooKeeper %s: %w", strings.Join(hosts, ","), err)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-deadline.C:
			conn.Close()
			return nil, fmt.Errorf("connect to ZooKeeper %s: no session within %v", strings.Join(hosts, ","), timeout)
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

// walkZK visits every node under root (root itself too, unless it is "/")
// parents before children, children in name order, skipping /zookeeper. A
// node deleted while the walk runs is passed over: the source is live.
func walkZK(ctx context.Context, conn zkReader, root string, fn func(znode) error) error {
	stack := []string{root}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if translate.IsReserved([]byte(p)) {
			continue
		}
		data, st, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", p, err)
		}
		acl, _, err := conn.GetACL(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get ACL of %s: %w", p, err)
		}
		if p != core.RootPath {
			if err := fn(znode{path: p, data: data, acl: acl, owner: st.EphemeralOwner}); err != nil {
				return err
			}
		}
		if isEphemeral(st.EphemeralOwner) || st.NumChildren == 0 {
			continue
		}
		kids, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("children of %s: %w", p, err)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(kids)))
		for _, k := range kids {
			stack = append(stack, string(core.JoinPath([]byte(p), []byte(k))))
		}
	}
	return nil
}

func isOpenACL(acl []zk.ACL) bool {
	return len(acl) == 1 && acl[0].Scheme == "world" && acl[0].ID == "anyone" && acl[0].Perms == zk.PermAll
}

func aclString(acl []zk.ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		parts[i] = fmt.Sprintf("%s:%s:%d", a.Scheme, a.ID, a.Perms)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// zkMigration copies a ZooKeeper tree to a Janus's ZooKeeper face (dstZK)
// or etcd face (dstEtcd).
type zkMigration struct {
	cfg     Config
	src     *zk.Conn
	dstZK   *zk.Conn
	dstEtcd *clientv3.Client
	// stream is the change stream of a follow or cut-over, and dirty the
	// paths it reported changed.
	stream *zkStream
	dirty  *dirtySet
}

func openZK(ctx context.Context, cfg Config) (*zkMigration, error) {
	m := &zkMigration{cfg: cfg}
	var err error
	if m.src, err = connectZK(ctx, cfg.From.Hosts, cfg.DialTimeout); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if cfg.To.Scheme == "zk" {
		m.dstZK, err = connectZK(ctx, cfg.To.Hosts, cfg.DialTimeout)
	} else {
		m.dstEtcd, err = connectEtcd(ctx, cfg.To.Hosts, cfg.DialTimeout)
	}
	if err != nil {
		m.close()
		return nil, fmt.Errorf("target: %w", err)
	}
	return m, nil
}

func (m *zkMigration) close() {
	m.closeStream()
	if m.src != nil {
		m.src.Close()
	}
	if m.dstZK != nil {
		m.dstZK.Close()
	}
	if m.dstEtcd != nil {
		m.dstEtcd.Close()
	}
}

func (m *zkMigration) root() string {
	if m.cfg.From.Path == "" {
		return core.RootPath
	}
	return m.cfg.From.Path
}

func (m *zkMigration) copy(ctx context.Context, rep *Report) error {
	if !m.cfg.Follow && !m.cfg.Cutover {
		if err := m.openStream(ctx, false); err != nil {
			return err
		}
		return m.copyFrom(ctx, m.reader(ctx), rep, func(n znode) (bool, bool) {
			return true, m.dstZK != nil && !isOpenACL(n.acl)
		}, nil)
	}
	// Following: the watch is set before the source is listed, and the
	// target is brought to equal the listing (a follow may resume on a
	// target an earlier run left behind).
	if err := m.openStream(ctx, true); err != nil {
		return err
	}
	return m.resync(ctx, rep, false)
}

// copyFrom walks the source through r and writes each node decide says
// to (write: its data; setACL: its ACL, which is set after the whole tree
// so that a restrictive ACL never blocks the copy of its subtree), then
// runs after (nil: nothing).
func (m *zkMigration) copyFrom(ctx context.Context, r zkReader, rep *Report, decide func(znode) (write, setACL bool), after func() error) error {
	prog := &progress{out: m.cfg.Out, every: m.cfg.ProgressEvery, what: "copied", start: time.Now()}
	if m.stream != nil {
		// ETA from the source's own count; without it the bar is a
		// count alone.
		if total, err := m.stream.countBelow(ctx, m.root()); err == nil {
			prog.total = total
		}
	}
	var batch []clientv3.Op
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := m.dstEtcd.Txn(ctx).Then(batch...).Commit(); err != nil {
			return fmt.Errorf("target: put %d keys: %w", len(batch), err)
		}
		batch = batch[:0]
		return nil
	}
	if m.dstZK != nil {
		if err := m.ensureAncestors(m.root()); err != nil {
			return err
		}
	}
	var acls []znode // applied after the whole tree is written
	err := m.walkFrom(ctx, r, rep, func(n znode) error {
		if m.dstEtcd != nil && !isOpenACL(n.acl) {
			rep.ACLsDropped++
		}
		write, setACL := decide(n)
		prog.add(1)
		if setACL {
			acls = append(acls, n)
		}
		if !write {
			return nil
		}
		rep.Copied++
		rep.Bytes += int64(len(n.data))
		if m.dstEtcd != nil {
			batch = append(batch, clientv3.OpPut(n.path, string(n.data)))
			if len(batch) >= m.cfg.BatchSize {
				return flush()
			}
			return nil
		}
		return m.createZK(n)
	})
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	for i := len(acls) - 1; i >= 0; i-- {
		if _, err := m.dstZK.SetACL(acls[i].path, acls[i].acl, -1); err != nil {
			return fmt.Errorf("target: set ACL of %s: %w", acls[i].path, err)
		}
	}
	prog.finish()
	if after != nil {
		return after()
	}
	return nil
}

// walkSource walks the source, skipping ephemerals; with rep, it reports
// them.
func (m *zkMigration) walkSource(ctx context.Context, rep *Report, fn func(znode) error) error {
	return m.walkFrom(ctx, m.reader(ctx), rep, fn)
}

// walkFrom is walkSource through r.
func (m *zkMigration) walkFrom(ctx context.Context, r zkReader, rep *Report, fn func(znode) error) error {
	return walkZK(ctx, r, m.root(), func(n znode) error {
		if isEphemeral(n.owner) {
			if rep != nil {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("ephemeral %s (session 0x%x)", n.path, n.owner))
				fmt.Fprintf(m.cfg.Out, "skipped ephemeral %s (session 0x%x)\n", n.path, n.owner)
			}
			return nil
		}
		return fn(n)
	})
}

// createZK writes n through the target's ZooKeeper face with an open ACL
// (the real one is set after its subtree is written), or updates its data
// when it exists (a second run over the same target).
func (m *zkMigration) createZK(n znode) error {
	_, err := m.dstZK.Create(n.path, n.data, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNodeExists) {
		_, err = m.dstZK.Set(n.path, n.data, -1)
	}
	if err != nil {
		return fmt.Errorf("target: write %s: %w", n.path, err)
	}
	return nil
}

// ensureAncestors creates the ancestors of a subtree's root on the target,
// empty and open, so that the subtree can be written below them.
func (m *zkMigration) ensureAncestors(root string) error {
	parents := translate.ImplicitParents([]byte(root))
	for i := len(parents) - 1; i >= 0; i-- {
		if _, err := m.dstZK.Create(string(parents[i]), nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("target: create ancestor %s: %w", parents[i], err)
		}
	}
	return nil
}

func (m *zkMigration) verify(ctx context.Context, rep *Report) error {
	src := map[string]znode{}
	if err := m.walkSource(ctx, nil, func(n znode) error { src[n.path] = n; return nil }); err != nil {
		return fmt.Errorf("verify: read source: %w", err)
	}
	dst := map[string]znode{}
	if m.dstZK != nil {
		err := walkZK(ctx, m.dstZK, m.root(), func(n znode) error {
			if !isEphemeral(n.owner) {
				dst[n.path] = n
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("verify: read target: %w", err)
		}
	} else {
		kvs, err := listEtcd(ctx, m.dstEtcd, treeRange(m.root()), 0)
		if err != nil {
			return fmt.Errorf("verify: read target: %w", err)
		}
		for _, kv := range kvs {
			if kv.Lease == 0 && !translate.IsReserved(kv.Key) {
				dst[string(kv.Key)] = znode{path: string(kv.Key), data: kv.Value}
			}
		}
	}
	d := differ{out: m.cfg.Out, rep: rep}
	for _, p := range unionKeys(src, dst) {
		s, inSrc := src[p]
		t, inDst := dst[p]
		switch {
		case !inDst:
			d.add("only in source: %s", p)
		case !inSrc:
			d.add("only in target: %s", p)
		case !bytes.Equal(s.data, t.data):
			d.add("data of %s: source %s, target %s", p, showData(s.data), showData(t.data))
		case m.dstZK != nil && aclString(s.acl) != aclString(t.acl):
			d.add("ACL of %s: source %s, target %s", p, aclString(s.acl), aclString(t.acl))
		}
	}
	return d.result(len(src))
}

// treeRange is the etcd key range holding root and every path below it.
func treeRange(root string) keyRange {
	if root == core.RootPath {
		return keyRange{key: "/", end: "0"} // '0' follows '/'
	}
	return keyRange{key: root, end: root + "0", only: func(k []byte) bool {
		return string(k) == root || strings.HasPrefix(string(k), root+"/")
	}}
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// showData quotes short values and summarizes long ones.
func showData(b []byte) string {
	const max = 64
	if len(b) <= max {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q... (%d bytes)", b[:max], len(b))
}
