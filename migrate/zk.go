package migrate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
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

// connectZK opens a session, waits until it is established and adds the
// identities.
func connectZK(ctx context.Context, hosts []string, timeout time.Duration, auth []Auth) (*zk.Conn, error) {
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
				for _, a := range auth {
					if err := conn.AddAuth(a.Scheme, a.Credentials); err != nil {
						conn.Close()
						return nil, fmt.Errorf("ZooKeeper %s: add %s identity: %w", strings.Join(hosts, ","), a.Scheme, err)
					}
				}
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

// walkParallel is how many nodes a walk reads at once: the reads of one
// round go out together on the session (ZooKeeper answers a session's
// requests in order, pipelined), so a walk costs a round trip per chunk
// rather than three per node.
const walkParallel = 64

// fetched is one node as a walk read it; gone means it was deleted while
// the walk ran.
type fetched struct {
	n    znode
	kids []string
	gone bool
	err  error
}

// fetchZK reads p's data, ACL and (if it has any and is not ephemeral)
// children.
func fetchZK(conn zkReader, p string) fetched {
	data, st, err := conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return fetched{gone: true}
	}
	if err != nil {
		return fetched{err: fmt.Errorf("get %s: %w", p, err)}
	}
	acl, _, err := conn.GetACL(p)
	if errors.Is(err, zk.ErrNoNode) {
		return fetched{gone: true}
	}
	if err != nil {
		return fetched{err: fmt.Errorf("get ACL of %s: %w", p, err)}
	}
	f := fetched{n: znode{path: p, data: data, acl: acl, owner: st.EphemeralOwner}}
	if isEphemeral(st.EphemeralOwner) || st.NumChildren == 0 {
		return f
	}
	kids, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return fetched{gone: true}
	}
	if err != nil {
		return fetched{err: fmt.Errorf("children of %s: %w", p, err)}
	}
	sort.Strings(kids)
	f.kids = kids
	return f
}

// walkZK visits every node under root (root itself too, unless it is "/"),
// each after its parent, skipping /zookeeper. It reads up to walkParallel
// nodes at once. A node deleted while the walk runs is passed over: the
// source is live.
func walkZK(ctx context.Context, conn zkReader, root string, fn func(znode) error) error {
	stack := []string{root}
	results := make([]fetched, walkParallel)
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The top of the stack is the next node in order; take up to
		// walkParallel of them, top first.
		k := min(len(stack), walkParallel)
		chunk := slices.Clone(stack[len(stack)-k:])
		slices.Reverse(chunk)
		stack = stack[:len(stack)-k]
		var wg sync.WaitGroup
		for i, p := range chunk {
			if translate.IsReserved([]byte(p)) {
				results[i] = fetched{gone: true}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = fetchZK(conn, p)
			}()
		}
		wg.Wait()
		for i := range chunk {
			r := results[i]
			if r.err != nil {
				return r.err
			}
			if !r.gone && r.n.path != core.RootPath {
				if err := fn(r.n); err != nil {
					return err
				}
			}
		}
		// Children of the chunk's first node end on top.
		for i := len(chunk) - 1; i >= 0; i-- {
			kids := results[i].kids
			for j := len(kids) - 1; j >= 0; j-- {
				stack = append(stack, string(core.JoinPath([]byte(chunk[i]), []byte(kids[j]))))
			}
			results[i] = fetched{}
		}
	}
	return nil
}

// ErrACLHidden is returned when the source shows a digest ACL without its
// digest: copied, it would lock everyone out of the node.
var ErrACLHidden = errors.New("the source hides this node's digest ACL from the migration's session")

// checkACLReadable refuses an ACL whose digest ZooKeeper redacted. Since
// 3.6 getACL shows a digest id as "user:x" to a session without ADMIN
// permission on the node; a real digest is a base64 SHA-1, never "x".
func checkACLReadable(p string, acl []zk.ACL) error {
	for _, a := range acl {
		if a.Scheme == "digest" && strings.HasSuffix(a.ID, ":x") {
			return fmt.Errorf("ACL of %s: %w (%s:%s); add an identity with ADMIN permission there, or the super user, with --auth digest:user:password", p, ErrACLHidden, a.Scheme, a.ID)
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
	if m.src, err = connectZK(ctx, cfg.From.Hosts, cfg.DialTimeout, cfg.Auth); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if cfg.To.Scheme == "zk" {
		m.dstZK, err = connectZK(ctx, cfg.To.Hosts, cfg.DialTimeout, cfg.Auth)
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
		return m.copyFrom(ctx, m.reader(ctx), rep, func(n znode) (write, bool) {
			return writeCreate, m.dstZK != nil && !isOpenACL(n.acl)
		}, nil)
	}
	// Following: the watch is set before the source is listed, and the
	// target is brought to equal the listing (a follow may resume on a
	// target an earlier run left behind).
	if err := m.openStream(ctx, true); err != nil {
		return err
	}
	return m.resync(ctx, rep)
}

// write is what a copy does with one source node.
type write int

const (
	writeNone   write = iota // the target has it as it is
	writeCreate              // the target lacks it (a create that finds it overwrites it)
	writeSet                 // the target has it with other data
)

// multiBytes bounds the data in one ZooKeeper multi a copy sends, well
// below the 1 MiB request limit.
const multiBytes = 256 << 10

// copyFrom walks the source through r and writes each node as decide says
// (its data; and, with setACL, its ACL, set after the whole tree so that a
// restrictive ACL never blocks the copy of its subtree), then runs after
// (nil: nothing). Writes go in batches: etcd transactions, or ZooKeeper
// multis, so that the target commits many nodes at once.
func (m *zkMigration) copyFrom(ctx context.Context, r zkReader, rep *Report, decide func(znode) (w write, setACL bool), after func() error) error {
	prog := &progress{out: m.cfg.Out, every: m.cfg.ProgressEvery, what: "copied", start: time.Now()}
	if m.stream != nil {
		// ETA from the source's own count; without it the bar is a
		// count alone.
		if total, err := m.stream.countBelow(ctx, m.root()); err == nil {
			prog.total = total
		}
	}
	var (
		etcdOps []clientv3.Op
		zkOps   []any
		zkNodes []znode
		size    int
	)
	flush := func() error {
		defer func() { etcdOps, zkOps, zkNodes, size = etcdOps[:0], zkOps[:0], zkNodes[:0], 0 }()
		if len(etcdOps) > 0 {
			if _, err := m.dstEtcd.Txn(ctx).Then(etcdOps...).Commit(); err != nil {
				return fmt.Errorf("target: put %d keys: %w", len(etcdOps), err)
			}
		}
		if len(zkOps) > 0 {
			if _, err := m.dstZK.Multi(zkOps...); err != nil {
				// One node of the batch was not as expected (a copy
				// over an earlier one): write them one by one.
				for _, n := range zkNodes {
					if err := m.createZK(n); err != nil {
						return err
					}
				}
			}
		}
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
		w, setACL := decide(n)
		prog.add(1)
		if setACL {
			acls = append(acls, n)
		}
		if w == writeNone {
			return nil
		}
		rep.Copied++
		rep.Bytes += int64(len(n.data))
		switch {
		case m.dstEtcd != nil:
			etcdOps = append(etcdOps, clientv3.OpPut(n.path, string(n.data)))
		case w == writeSet:
			zkOps = append(zkOps, &zk.SetDataRequest{Path: n.path, Data: n.data, Version: -1})
			zkNodes = append(zkNodes, n)
		default:
			zkOps = append(zkOps, &zk.CreateRequest{Path: n.path, Data: n.data, Acl: zk.WorldACL(zk.PermAll)})
			zkNodes = append(zkNodes, n)
		}
		size += len(n.data) + len(n.path)
		if len(etcdOps)+len(zkOps) >= m.cfg.BatchSize || size >= multiBytes {
			return flush()
		}
		return nil
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
		if m.dstZK != nil {
			if err := checkACLReadable(n.path, n.acl); err != nil {
				return fmt.Errorf("source: %w", err)
			}
		}
		if isEphemeral(n.owner) {
			if rep != nil {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("ephemeral %s (session 0x%x)", n.path, n.owner))
				if !rep.quiet {
					fmt.Fprintf(m.cfg.Out, "skipped ephemeral %s (session 0x%x)\n", n.path, n.owner)
				}
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

// verify compares the trees holding one small summary per source node,
// not its data, so that a large tree verifies in bounded memory per node;
// a node whose data differs is read again to show the difference.
func (m *zkMigration) verify(ctx context.Context, rep *Report) error {
	src := map[string]nodeSum{}
	if err := m.walkSource(ctx, nil, func(n znode) error {
		src[n.path] = summarize(n)
		return nil
	}); err != nil {
		return fmt.Errorf("verify: read source: %w", err)
	}
	compared := len(src)
	type diff struct{ path, line string }
	var diffs []diff
	err := m.walkTarget(ctx, func(t znode) error {
		s, ok := src[t.path]
		delete(src, t.path)
		switch {
		case !ok:
			diffs = append(diffs, diff{t.path, fmt.Sprintf("only in target: %s", t.path)})
		case s.data != sha256.Sum256(t.data):
			data, _, err := m.reader(ctx).Get(t.path)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return fmt.Errorf("source: get %s: %w", t.path, err)
			}
			diffs = append(diffs, diff{t.path, fmt.Sprintf("data of %s: source %s, target %s", t.path, showData(data), showData(t.data))})
		case m.dstZK != nil && s.acl != summarize(t).acl:
			diffs = append(diffs, diff{t.path, fmt.Sprintf("ACL of %s: source %s, target %s", t.path, s.aclString(), aclString(t.acl))})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: read target: %w", err)
	}
	for p := range src {
		diffs = append(diffs, diff{p, fmt.Sprintf("only in source: %s", p)})
	}
	slices.SortFunc(diffs, func(a, b diff) int { return strings.Compare(a.path, b.path) })
	d := differ{out: m.cfg.Out, rep: rep}
	for _, x := range diffs {
		d.add("%s", x.line)
	}
	return d.result(compared)
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
