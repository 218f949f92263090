package core

// Census counts what a state holds, as monitoring reports it: etcd's key
// count, ZooKeeper's znode, ephemeral and session counts and its
// approximate data size, and the leases alive. The store keeps one up to
// date as it applies entries, so that a scrape need not walk the state;
// CountCensus is the walk it must always agree with.
type Census struct {
	// Keys is every stored node: etcd's keys_total.
	Keys int64
	// Znodes is the stored tree nodes but the root and the system nodes
	// (ZooKeeper's znode_count adds those: see Census.ZnodeCount).
	Znodes int64
	// Ephemerals is the znodes attached to a lease: ZooKeeper's
	// ephemerals_count.
	Ephemerals int64
	// DataBytes is the znodes' path and data sizes, and the stored system
	// nodes' data (ZooKeeper's approximate_data_size adds the rest: see
	// Census.DataSize).
	DataBytes int64
	// Leases is every lease alive, ZooKeeper sessions included; Sessions
	// those that are sessions.
	Leases   int64
	Sessions int64
}

// AddNode counts a stored node in (sign 1) or out (sign -1); nil counts as
// nothing.
func (c *Census) AddNode(n *Node, sign int64) {
	if n == nil {
		return
	}
	c.Keys += sign
	if !IsTreePath(n.Key) || string(n.Key) == RootPath {
		return
	}
	if IsSystemPath(n.Key) {
		c.DataBytes += sign * int64(len(n.Value)) // its path is counted in DataSize
		return
	}
	c.Znodes += sign
	c.DataBytes += sign * int64(len(n.Key)+len(n.Value))
	if IsEphemeralZnode(n) {
		c.Ephemerals += sign
	}
}

// IsEphemeralZnode reports whether a stored node is what ZooKeeper counts
// as an ephemeral: a znode (not the root nor a system node) attached to a
// lease or session.
func IsEphemeralZnode(n *Node) bool {
	return IsTreePath(n.Key) && string(n.Key) != RootPath && !IsSystemPath(n.Key) &&
		n.Lease != 0 && n.Mode == ModePersistent
}

// AddLease counts a lease in (sign 1) or out (sign -1); nil counts as
// nothing.
func (c *Census) AddLease(l *Lease, sign int64) {
	if l == nil {
		return
	}
	c.Leases += sign
	if l.Session != nil {
		c.Sessions += sign
	}
}

// Plus returns c with d's counts added.
func (c Census) Plus(d Census) Census {
	return Census{
		Keys: c.Keys + d.Keys, Znodes: c.Znodes + d.Znodes, Ephemerals: c.Ephemerals + d.Ephemerals,
		DataBytes: c.DataBytes + d.DataBytes, Leases: c.Leases + d.Leases, Sessions: c.Sessions + d.Sessions,
	}
}

// ZnodeCount is ZooKeeper's znode_count: the stored znodes, the root, the
// system nodes whether stored or not, and the node ZooKeeper's DataTree
// keeps at "" as the root's alias (its count includes both: a fresh
// ZooKeeper reports 5 nodes and 44 bytes).
func (c Census) ZnodeCount() int64 { return c.Znodes + 2 + int64(len(systemPaths)) }

// DataSize is ZooKeeper's approximate_data_size: DataBytes, the system
// nodes' paths and the root's one byte.
func (c Census) DataSize() int64 {
	size := c.DataBytes + 1
	for _, p := range systemPaths {
		size += int64(len(p))
	}
	return size
}

// CountCensus walks every node and lease of v.
func CountCensus(v View) (Census, error) {
	var c Census
	if err := v.Range(nil, nil, func(n *Node) bool { c.AddNode(n, 1); return true }); err != nil {
		return Census{}, err
	}
	if err := v.Leases(func(l *Lease) bool { c.AddLease(l, 1); return true }); err != nil {
		return Census{}, err
	}
	return c, nil
}
