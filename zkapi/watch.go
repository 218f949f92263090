package zkapi

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// watchMode is how a watch behaves once it fires.
type watchMode uint8

const (
	watchStandard   watchMode = iota // one-shot: removed when it fires
	watchPersistent                  // stays; fires for the path itself
	watchRecursive                   // stays; fires for the path and everything below
)

// watchEntry is one connection's watch on one path.
type watchEntry struct {
	mode watchMode
	// armedAt is the revision the watcher's read showed: events at or
	// below it are already reflected in what the client saw.
	armedAt int64
}

// watchTable is one of ZooKeeper's two WatchManagers (data or child
// watches): path -> watching connections.
type watchTable struct {
	byPath    map[string]map[*conn]watchEntry
	recursive int // entries with watchRecursive, so most events skip the ancestor walk
}

func newWatchTable() watchTable { return watchTable{byPath: map[string]map[*conn]watchEntry{}} }

// add sets c's watch on path; a later mode replaces an earlier one, as in
// ZooKeeper 3.8's WatcherModeManager.
func (t *watchTable) add(path string, c *conn, e watchEntry) {
	m := t.byPath[path]
	if m == nil {
		m = map[*conn]watchEntry{}
		t.byPath[path] = m
	}
	if old, ok := m[c]; ok && old.mode == watchRecursive {
		t.recursive--
	}
	if e.mode == watchRecursive {
		t.recursive++
	}
	m[c] = e
}

func (t *watchTable) remove(path string, c *conn) bool {
	m := t.byPath[path]
	e, ok := m[c]
	if !ok {
		return false
	}
	if e.mode == watchRecursive {
		t.recursive--
	}
	delete(m, c)
	if len(m) == 0 {
		delete(t.byPath, path)
	}
	return true
}

func (t *watchTable) has(path string, c *conn) bool {
	_, ok := t.byPath[path][c]
	return ok
}

// trigger returns the connections an event of type typ on path at revision
// rev notifies, once each, removing the one-shot watches it consumes, by the
// rules of ZooKeeper's WatchManager.triggerWatch: watches on the path fire,
// recursive watches on ancestors fire except for NodeChildrenChanged, and
// connections in suppress (already told by the other table) are skipped
// though their one-shot watches are still consumed.
func (t *watchTable) trigger(path string, typ jute.EventType, rev int64, suppress map[*conn]bool, fired map[*conn]bool) []*conn {
	var out []*conn
	visit := func(p string, atPath bool) {
		m := t.byPath[p]
		for c, e := range m {
			if e.armedAt >= rev {
				continue
			}
			switch {
			case e.mode == watchRecursive:
				if typ == jute.EventNodeChildrenChanged {
					continue
				}
			case !atPath:
				continue
			case e.mode == watchStandard:
				delete(m, c)
			}
			if !suppress[c] && !fired[c] {
				fired[c] = true
				out = append(out, c)
			}
		}
		if len(m) == 0 {
			delete(t.byPath, p)
		}
	}
	visit(path, true)
	if t.recursive > 0 {
		for p, ok := core.ParentPath([]byte(path)); ok; p, ok = core.ParentPath(p) {
			visit(string(p), false)
		}
	}
	return out
}

// watchManager turns the server's one stream of committed events into watch
// notifications. It also tracks the highest revision dispatched, which
// replies wait for so that notifications precede them.
type watchManager struct {
	mu     sync.Mutex
	data   watchTable // data and exists watches, and persistent ones
	child  watchTable // child watches, and persistent ones
	byConn map[*conn]map[string]struct{}
	// dispatched is written under mu and read without it by every
	// reply, which must not queue behind the dispatcher for it.
	dispatched atomic.Int64
	advanced   chan struct{} // closed and replaced when dispatched moves
	// fromEtcd counts the notifications sent for revisions etcd clients
	// wrote: the changes that crossed from the etcd face to this one.
	fromEtcd atomic.Uint64
}

func newWatchManager() *watchManager {
	return &watchManager{
		data: newWatchTable(), child: newWatchTable(),
		byConn: map[*conn]map[string]struct{}{}, advanced: make(chan struct{}),
	}
}

// start sets the revision the event stream begins after.
func (w *watchManager) start(rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.advanceLocked(rev)
}

func (w *watchManager) advanceLocked(rev int64) {
	if rev <= w.dispatched.Load() {
		return
	}
	w.dispatched.Store(rev)
	close(w.advanced)
	w.advanced = make(chan struct{})
}

// Dispatched returns the highest revision whose notifications are queued.
func (w *watchManager) Dispatched() int64 {
	return w.dispatched.Load()
}

// waitDispatched returns once every notification up to rev is queued.
func (w *watchManager) waitDispatched(ctx context.Context, rev int64) error {
	for {
		if w.dispatched.Load() >= rev {
			return nil
		}
		w.mu.Lock()
		if w.dispatched.Load() >= rev {
			w.mu.Unlock()
			return nil
		}
		ch := w.advanced
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// addLocked registers a watch; w.mu must be held.
func (w *watchManager) addLocked(t *watchTable, path string, c *conn, e watchEntry) {
	t.add(path, c, e)
	paths := w.byConn[c]
	if paths == nil {
		paths = map[string]struct{}{}
		w.byConn[c] = paths
	}
	paths[path] = struct{}{}
}

// addWatchLocked registers a persistent or recursive watch on both
// tables, as ZooKeeper's addWatch does, armed after revision rev; w.mu
// must be held.
func (w *watchManager) addWatchLocked(c *conn, path string, mode watchMode, rev int64) {
	e := watchEntry{mode: mode, armedAt: rev}
	w.addLocked(&w.data, path, c, e)
	w.addLocked(&w.child, path, c, e)
}

// remove deletes c's watches of a type on path and reports whether any
// existed.
func (w *watchManager) remove(c *conn, path string, typ jute.WatcherType) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	removed := false
	if typ == jute.WatcherChildren || typ == jute.WatcherAny {
		removed = w.child.remove(path, c) || removed
	}
	if typ == jute.WatcherData || typ == jute.WatcherAny {
		removed = w.data.remove(path, c) || removed
	}
	if !w.data.has(path, c) && !w.child.has(path, c) {
		delete(w.byConn[c], path)
	}
	return removed
}

// has reports whether c has a watch of a type on path.
func (w *watchManager) has(c *conn, path string, typ jute.WatcherType) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch typ {
	case jute.WatcherChildren:
		return w.child.has(path, c)
	case jute.WatcherData:
		return w.data.has(path, c)
	}
	return w.child.has(path, c) || w.data.has(path, c)
}

// removeConn drops every watch of a closed connection.
func (w *watchManager) removeConn(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.byConn[c] {
		w.data.remove(p, c)
		w.child.remove(p, c)
	}
	delete(w.byConn, c)
}

// countLocked returns the number of watches and watched paths, for the
// four-letter words.
func (w *watchManager) counts() (conns, paths, watches int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range []*watchTable{&w.data, &w.child} {
		paths += len(t.byPath)
		for _, m := range t.byPath {
			watches += len(m)
		}
	}
	return len(w.byConn), paths, watches
}

// dataSummary counts what ZooKeeper's wchs reports: its data watch
// manager only (data, exists and persistent watches), as connections with
// a watch, watched paths, and (path, connection) pairs.
func (w *watchManager) dataSummary() (conns, paths, watches int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[*conn]bool{}
	for _, m := range w.data.byPath {
		watches += len(m)
		for c := range m {
			seen[c] = true
		}
	}
	return len(seen), len(w.data.byPath), watches
}

// dataWatches lists the data watches (wchp, wchc) as path -> session ids
// and session id -> paths, each sorted.
func (w *watchManager) dataWatches() (byPath map[string][]int64, bySession map[int64][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byPath, bySession = map[string][]int64{}, map[int64][]string{}
	for p, m := range w.data.byPath {
		for c := range m {
			id := c.sessionID()
			byPath[p] = append(byPath[p], id)
			bySession[id] = append(bySession[id], p)
		}
	}
	for _, ids := range byPath {
		slices.Sort(ids)
	}
	for _, ps := range bySession {
		slices.Sort(ps)
	}
	return byPath, bySession
}

// aclLookup returns the ACL of the node at a path as of the revision being
// dispatched (nil: open to everyone, as for a missing or implicit node).
type aclLookup func(path string) []core.ACL

// dispatch queues the notifications for one committed revision. parentACL
// is asked only when a child watch is about to fire.
func (w *watchManager) dispatch(re core.RevEvents, parentACL aclLookup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sent := 0
	for _, ev := range zkEvents(re.Events) {
		sent += w.fireLocked(ev, re.Rev, parentACL)
	}
	if re.Origin == core.OriginEtcd {
		w.fromEtcd.Add(uint64(sent))
	}
	w.advanceLocked(re.Rev)
}

// zkEvent is a change as ZooKeeper clients see it.
type zkEvent struct {
	typ  jute.EventType // NodeCreated, NodeDeleted or NodeDataChanged
	path string
	// acl is the node's ACL when the event happened (before a delete):
	// only connections that may READ the node are told.
	acl []core.ACL
}

// zkEvents translates one revision's core events into ZooKeeper node
// events, in order. Keys that are not tree paths are etcd-only. A stored
// node deleted while it has children stays as an implicit parent: to a
// ZooKeeper client its data changed.
func zkEvents(evs []core.Event) []zkEvent {
	var out []zkEvent
	for i, ev := range evs {
		if ev.Node == nil || !core.IsTreePath(ev.Node.Key) {
			continue
		}
		path := string(ev.Node.Key)
		switch {
		case ev.Type == core.EventPut && ev.Implicit:
			if i > 0 && evs[i-1].Type == core.EventDelete && !evs[i-1].Implicit && string(evs[i-1].Node.Key) == path {
				continue // reported with the delete, as a data change
			}
			out = append(out, zkEvent{jute.EventNodeCreated, path, nil})
		case ev.Type == core.EventPut && ev.Prev == nil && !ev.WasImplicit:
			out = append(out, zkEvent{jute.EventNodeCreated, path, ev.Node.ACL})
		case ev.Type == core.EventPut:
			out = append(out, zkEvent{jute.EventNodeDataChanged, path, ev.Node.ACL})
		case ev.Type == core.EventDelete:
			var acl []core.ACL
			if ev.Prev != nil {
				acl = ev.Prev.ACL
			}
			if !ev.Implicit && i+1 < len(evs) && evs[i+1].Type == core.EventPut && evs[i+1].Implicit && string(evs[i+1].Node.Key) == path {
				// Now an implicit parent, open to everyone.
				out = append(out, zkEvent{jute.EventNodeDataChanged, path, nil})
				continue
			}
			out = append(out, zkEvent{jute.EventNodeDeleted, path, acl})
		}
	}
	return out
}

// fireLocked triggers the watches of one node event as ZooKeeper's DataTree
// does: a create fires the node's data watches and its parent's child
// watches; a delete fires the node's data and child watches (each
// connection once) and its parent's child watches; a data change fires the
// node's data watches.
//
// As in ZooKeeper 3.8.4 and the Debian 3.8.0 security update (the fix for
// CVE-2024-23944), a triggered watch is consumed for every watcher but the
// event reaches only connections allowed to READ the node (the parent, for
// NodeChildrenChanged). It returns how many notifications it sent.
func (w *watchManager) fireLocked(ev zkEvent, rev int64, parentACL aclLookup) (sent int) {
	parent, hasParent := core.ParentPath([]byte(ev.path))
	switch ev.typ {
	case jute.EventNodeCreated, jute.EventNodeDataChanged:
		sent += w.notify(w.data.trigger(ev.path, ev.typ, rev, nil, map[*conn]bool{}), ev.typ, ev.path, ev.acl)
	case jute.EventNodeDeleted:
		fired := map[*conn]bool{}
		sent += w.notify(w.data.trigger(ev.path, ev.typ, rev, nil, fired), ev.typ, ev.path, ev.acl)
		sent += w.notify(w.child.trigger(ev.path, ev.typ, rev, fired, map[*conn]bool{}), ev.typ, ev.path, ev.acl)
	}
	if hasParent && ev.typ != jute.EventNodeDataChanged {
		p := string(parent)
		if conns := w.child.trigger(p, jute.EventNodeChildrenChanged, rev, nil, map[*conn]bool{}); len(conns) > 0 {
			sent += w.notify(conns, jute.EventNodeChildrenChanged, p, parentACL(p))
		}
	}
	return sent
}

// notify sends the event to each of conns allowed to read it and returns
// how many it was sent to.
func (w *watchManager) notify(conns []*conn, typ jute.EventType, path string, acl []core.ACL) (sent int) {
	for _, c := range conns {
		if ids := c.identities(); core.ZKAllowed(c.srv.backend.Auth(), acl, []byte(path), core.PermRead, ids) {
			c.sendEvent(typ, path)
			sent++
		}
		if paths := w.byConn[c]; paths != nil && !w.data.has(path, c) && !w.child.has(path, c) {
			delete(paths, path)
		}
	}
	return sent
}
