package core

import (
	"bytes"
	"slices"
)

// View is a consistent read of the state at one revision. The store provides
// one over Badger; MemState provides one in memory for tests. Nodes and other
// records a View returns belong to the caller, who may keep but must not
// modify them: Apply clones before it changes anything. A View's errors are
// failures to read, never a bare *Error, which Apply would take for a
// refusal (see IsRefusal).
type View interface {
	// Meta returns the revision bookkeeping.
	Meta() (Meta, error)
	// Node returns the stored node at key, or nil. Implicit parents are
	// not stored nodes (see Dir and TreeNode).
	Node(key []byte) (*Node, error)
	// Dir returns the child metadata of a tree path, or nil.
	Dir(path []byte) (*Dir, error)
	// Range calls fn for every stored node with start <= key < end, in key
	// order, until fn returns false. A nil end has no upper bound.
	Range(start, end []byte, fn func(*Node) bool) error
	// Children calls fn with the name of every child of a tree path, in
	// byte order, until fn returns false.
	Children(parent []byte, fn func(name []byte) bool) error
	// HasChild reports whether name is in the child index of a tree
	// path: whether parent's child of that name is in the tree, stored
	// or implicit (the system nodes are linked only while stored). It is
	// one lookup where Node and Dir are two, which a create of a new
	// path would both find absent.
	HasChild(parent, name []byte) (bool, error)
	// Lease returns a lease, or nil.
	Lease(id int64) (*Lease, error)
	// Leases calls fn for every lease in ID order until fn returns false.
	Leases(fn func(*Lease) bool) error
	// LeaseKeys calls fn for every key attached to a lease, in key order,
	// until fn returns false.
	LeaseKeys(id int64, fn func(key []byte) bool) error
}

// TreeNode returns what ZooKeeper sees at a tree path: the stored node, or
// the implicit parent synthesized from its Dir, or nil. The root and the
// system nodes (see system.go) always exist. The Dir is returned too, for
// the node's Stat, with the system nodes counted among the children.
func TreeNode(v View, path []byte) (*Node, *Dir, error) {
	n, err := v.Node(path)
	if err != nil {
		return nil, nil, err
	}
	d, err := v.Dir(path)
	if err != nil {
		return nil, nil, err
	}
	if d, err = withSystemChildren(v, path, d); err != nil {
		return nil, nil, err
	}
	switch {
	case n != nil:
		return n, d, nil
	case string(path) == RootPath:
		if d != nil {
			return implicitNode(path, d), d, nil
		}
		return &Node{Key: []byte(RootPath), Implicit: true}, d, nil
	case IsSystemPath(path):
		return systemNode(path), d, nil
	case d != nil && d.NumChildren > 0:
		return implicitNode(path, d), d, nil
	}
	return nil, nil, nil
}

// inTree reports whether a tree path other than the root is in the tree,
// as TreeNode would find it: stored, implicit or a system node. Outside
// the system nodes that is its parent's child index, one lookup where
// TreeNode makes two (see View.HasChild).
func inTree(v View, path []byte) (bool, error) {
	if IsSystemPath(path) {
		return true, nil
	}
	parent, _ := ParentPath(path)
	return v.HasChild(parent, BaseName(path))
}

func implicitNode(path []byte, d *Dir) *Node {
	return &Node{
		Key:       append([]byte(nil), path...),
		CreateRev: d.ImplicitRev,
		ModRev:    d.ImplicitRev,
		Ctime:     d.ImplicitTime,
		Mtime:     d.ImplicitTime,
		Implicit:  true,
	}
}

// layer is one level of pending writes over a View. Its maps are made on
// first write and cleared, not dropped, when the layer is reused: most
// entries touch one or two kinds of record, and an Overlay applies many
// entries one after another.
type layer struct {
	nodes     map[string]*Node // nil value: deleted
	dirs      map[string]*Dir  // nil value: deleted
	children  map[string]bool  // childKey(parent,name) -> present
	leases    map[int64]*Lease // nil value: deleted
	leaseKeys map[string]bool  // leaseKeyKey(id,key) -> present
	meta      Meta
	hasMeta   bool
	// order keeps first-write order of the keys so batches are
	// deterministic without sorting maps. The group layer keeps none.
	nodeOrder  []string
	dirOrder   []string
	childOrder []string
	leaseOrder []int64
	lkOrder    []string
}

// reset empties the layer, keeping its storage for the next entry.
func (l *layer) reset() {
	clear(l.nodes)
	clear(l.dirs)
	clear(l.children)
	clear(l.leases)
	clear(l.leaseKeys)
	l.hasMeta = false
	l.nodeOrder = l.nodeOrder[:0]
	l.dirOrder = l.dirOrder[:0]
	l.childOrder = l.childOrder[:0]
	l.leaseOrder = l.leaseOrder[:0]
	l.lkOrder = l.lkOrder[:0]
}

// put sets m[k] = v, making m first if needed, and reports whether k is new.
func put[K comparable, V any](m *map[K]V, k K, v V) bool {
	if *m == nil {
		*m = map[K]V{}
	}
	_, had := (*m)[k]
	(*m)[k] = v
	return !had
}

// Overlay is a View with pending writes on top of a base View. Apply writes
// into its current layer; Commit turns that layer into the entry's Batch and
// folds it into the group layer, so later entries of the same group read it
// before the store has written anything; Rollback drops it.
type Overlay struct {
	base  View
	group *layer
	cur   *layer
}

// NewOverlay returns an Overlay over base with nothing pending.
func NewOverlay(base View) *Overlay {
	return &Overlay{base: base, group: &layer{}, cur: &layer{}}
}

// Reset drops everything pending and reads from base from now on.
func (o *Overlay) Reset(base View) {
	o.base = base
	o.group.reset()
	o.cur.reset()
}

func childKey(parent, name []byte) string {
	return string(parent) + "\x00" + string(name)
}

func leaseKeyKey(id int64, key []byte) string {
	var b [8]byte
	putUint64(b[:], uint64(id))
	return string(b[:]) + string(key)
}

func (o *Overlay) Meta() (Meta, error) {
	if o.cur.hasMeta {
		return o.cur.meta, nil
	}
	if o.group.hasMeta {
		return o.group.meta, nil
	}
	return o.base.Meta()
}

func (o *Overlay) Node(key []byte) (*Node, error) {
	for _, l := range []*layer{o.cur, o.group} {
		if n, ok := l.nodes[string(key)]; ok {
			return n, nil
		}
	}
	return o.base.Node(key)
}

func (o *Overlay) Dir(path []byte) (*Dir, error) {
	for _, l := range []*layer{o.cur, o.group} {
		if d, ok := l.dirs[string(path)]; ok {
			return d, nil
		}
	}
	return o.base.Dir(path)
}

func (o *Overlay) Lease(id int64) (*Lease, error) {
	for _, l := range []*layer{o.cur, o.group} {
		if le, ok := l.leases[id]; ok {
			return le, nil
		}
	}
	return o.base.Lease(id)
}

// pendingKeys returns the overlay's keys of one kind in [start, end), sorted,
// with the newest layer's verdict for each.
func pendingKeys[V any](layers []*layer, pick func(*layer) map[string]V, start, end []byte) ([]string, map[string]V) {
	seen := map[string]V{}
	var keys []string
	for _, l := range layers {
		for k, v := range pick(l) {
			if k < string(start) || (end != nil && k >= string(end)) {
				continue
			}
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = v
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, seen
}

// mergeSorted walks a base iteration and sorted pending keys together in
// order, letting pending entries replace or hide base ones.
func mergeSorted(pending []string, emitPending func(k string) bool, baseIter func(fn func(k string, emitBase func() bool) bool) error) error {
	i := 0
	stopped := false
	err := baseIter(func(k string, emitBase func() bool) bool {
		for i < len(pending) && pending[i] < k {
			if !emitPending(pending[i]) {
				stopped = true
				return false
			}
			i++
		}
		if i < len(pending) && pending[i] == k {
			i++
			if !emitPending(k) {
				stopped = true
				return false
			}
			return true
		}
		if !emitBase() {
			stopped = true
			return false
		}
		return true
	})
	if err != nil || stopped {
		return err
	}
	for ; i < len(pending); i++ {
		if !emitPending(pending[i]) {
			return nil
		}
	}
	return nil
}

func (o *Overlay) layers() []*layer { return []*layer{o.cur, o.group} }

func (o *Overlay) Range(start, end []byte, fn func(*Node) bool) error {
	keys, pend := pendingKeys(o.layers(), func(l *layer) map[string]*Node { return l.nodes }, start, end)
	return mergeSorted(keys,
		func(k string) bool {
			if n := pend[k]; n != nil {
				return fn(n)
			}
			return true
		},
		func(visit func(string, func() bool) bool) error {
			return o.base.Range(start, end, func(n *Node) bool {
				return visit(string(n.Key), func() bool { return fn(n) })
			})
		})
}

func (o *Overlay) Children(parent []byte, fn func(name []byte) bool) error {
	prefix := string(parent) + "\x00"
	keys, pend := pendingKeys(o.layers(), func(l *layer) map[string]bool { return l.children },
		[]byte(prefix), PrefixEnd([]byte(prefix)))
	return mergeSorted(keys,
		func(k string) bool {
			if pend[k] {
				return fn([]byte(k[len(prefix):]))
			}
			return true
		},
		func(visit func(string, func() bool) bool) error {
			return o.base.Children(parent, func(name []byte) bool {
				return visit(prefix+string(name), func() bool { return fn(name) })
			})
		})
}

func (o *Overlay) HasChild(parent, name []byte) (bool, error) {
	k := childKey(parent, name)
	for _, l := range []*layer{o.cur, o.group} {
		if present, ok := l.children[k]; ok {
			return present, nil
		}
	}
	return o.base.HasChild(parent, name)
}

func (o *Overlay) Leases(fn func(*Lease) bool) error {
	// Lease IDs order as big-endian bytes of the (non-negative) ID.
	toKey := func(id int64) string { var b [8]byte; putUint64(b[:], uint64(id)); return string(b[:]) }
	byKey := map[string]*Lease{}
	var keys []string
	for _, l := range o.layers() {
		for id, le := range l.leases {
			k := toKey(id)
			if _, dup := byKey[k]; dup {
				continue
			}
			byKey[k] = le
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return mergeSorted(keys,
		func(k string) bool {
			if le := byKey[k]; le != nil {
				return fn(le)
			}
			return true
		},
		func(visit func(string, func() bool) bool) error {
			return o.base.Leases(func(le *Lease) bool {
				return visit(toKey(le.ID), func() bool { return fn(le) })
			})
		})
}

func (o *Overlay) LeaseKeys(id int64, fn func(key []byte) bool) error {
	prefix := leaseKeyKey(id, nil)
	keys, pend := pendingKeys(o.layers(), func(l *layer) map[string]bool { return l.leaseKeys },
		[]byte(prefix), PrefixEnd([]byte(prefix)))
	return mergeSorted(keys,
		func(k string) bool {
			if pend[k] {
				return fn([]byte(k[len(prefix):]))
			}
			return true
		},
		func(visit func(string, func() bool) bool) error {
			return o.base.LeaseKeys(id, func(key []byte) bool {
				return visit(prefix+string(key), func() bool { return fn(key) })
			})
		})
}

// PrefixEnd returns the smallest key greater than every key with the prefix,
// or nil when there is none.
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Writes into the current layer.

func (o *Overlay) putNode(key []byte, n *Node) {
	k := string(key)
	if put(&o.cur.nodes, k, n) {
		o.cur.nodeOrder = append(o.cur.nodeOrder, k)
	}
}

func (o *Overlay) putDir(path []byte, d *Dir) {
	k := string(path)
	if put(&o.cur.dirs, k, d) {
		o.cur.dirOrder = append(o.cur.dirOrder, k)
	}
}

func (o *Overlay) putChild(parent, name []byte, present bool) {
	k := childKey(parent, name)
	if put(&o.cur.children, k, present) {
		o.cur.childOrder = append(o.cur.childOrder, k)
	}
}

func (o *Overlay) putLease(id int64, le *Lease) {
	if put(&o.cur.leases, id, le) {
		o.cur.leaseOrder = append(o.cur.leaseOrder, id)
	}
}

func (o *Overlay) putLeaseKey(id int64, key []byte, present bool) {
	k := leaseKeyKey(id, key)
	if put(&o.cur.leaseKeys, k, present) {
		o.cur.lkOrder = append(o.cur.lkOrder, k)
	}
}

func (o *Overlay) putMeta(m Meta) { o.cur.meta, o.cur.hasMeta = m, true }

// Rollback drops the current layer.
func (o *Overlay) Rollback() { o.cur.reset() }

// commit folds the current layer into the group layer and returns its writes.
// The Batch gets slices of its own: the layer's storage is reused.
func (o *Overlay) commit(b *Batch) {
	c, g := o.cur, o.group
	if len(c.nodeOrder) > 0 {
		b.Nodes = make([]NodeWrite, 0, len(c.nodeOrder))
	}
	for _, k := range c.nodeOrder {
		n := c.nodes[k]
		// A stored node's key is the key it is written under.
		key := []byte(nil)
		if n != nil {
			key = n.Key
		} else {
			key = []byte(k)
		}
		b.Nodes = append(b.Nodes, NodeWrite{Key: key, Node: n})
		put(&g.nodes, k, n)
	}
	if len(c.dirOrder) > 0 {
		b.Dirs = make([]DirWrite, 0, len(c.dirOrder))
	}
	for _, k := range c.dirOrder {
		b.Dirs = append(b.Dirs, DirWrite{Path: []byte(k), Dir: c.dirs[k]})
		put(&g.dirs, k, c.dirs[k])
	}
	if len(c.childOrder) > 0 {
		b.Children = make([]ChildWrite, 0, len(c.childOrder))
	}
	for _, k := range c.childOrder {
		kb := []byte(k)
		i := bytes.IndexByte(kb, 0)
		b.Children = append(b.Children, ChildWrite{Parent: kb[:i:i], Name: kb[i+1:], Present: c.children[k]})
		put(&g.children, k, c.children[k])
	}
	for _, id := range c.leaseOrder {
		b.Leases = append(b.Leases, LeaseWrite{ID: id, Lease: c.leases[id]})
		put(&g.leases, id, c.leases[id])
	}
	for _, k := range c.lkOrder {
		b.LeaseKeys = append(b.LeaseKeys, LeaseKeyWrite{ID: int64(getUint64([]byte(k[:8]))), Key: []byte(k[8:]), Present: c.leaseKeys[k]})
		put(&g.leaseKeys, k, c.leaseKeys[k])
	}
	if c.hasMeta {
		m := c.meta
		b.Meta = &m
		g.meta, g.hasMeta = m, true
	}
	c.reset()
}
