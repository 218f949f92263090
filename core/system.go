package core

import "bytes"

// ZooKeeper's system nodes: /zookeeper, /zookeeper/config and
// /zookeeper/quota exist on every ZooKeeper from the start, created at zxid
// 0 with time 0. They are not stored: like the root, they are part of the
// tree by definition, so a brand-new store holds no key (an etcd client sees
// an empty keyspace at revision 1) while a ZooKeeper client sees them.
//
// The rule, everywhere in the tree code: a system path is always visible to
// ZooKeeper. It is linked into its parent's child index only while a node
// is stored there (data written to it, or a store from before this rule),
// so children reads add the others (TreeChildren) and counts add them
// (TreeNode's Dir). It is never removed with its last child, and Apply
// emits no event for it appearing or disappearing. What a client writes
// under /zookeeper/quota (ZooKeeper's quota nodes) is stored as any node
// is.

// systemPaths are ZooKeeper's system nodes, parents first.
var systemPaths = []string{"/zookeeper", "/zookeeper/config", "/zookeeper/quota"}

// SystemPaths returns ZooKeeper's system nodes, parents first.
func SystemPaths() []string { return append([]string(nil), systemPaths...) }

// IsSystemPath reports whether path is one of ZooKeeper's system nodes.
func IsSystemPath(path []byte) bool {
	for _, p := range systemPaths {
		if string(path) == p {
			return true
		}
	}
	return false
}

// systemChildren returns the names of the system nodes under parent, in
// byte order.
func systemChildren(parent []byte) [][]byte {
	switch string(parent) {
	case RootPath:
		return [][]byte{[]byte("zookeeper")}
	case "/zookeeper":
		return [][]byte{[]byte("config"), []byte("quota")}
	}
	return nil
}

// systemNode is a system node as ZooKeeper shows it when nothing is
// stored there: empty, created at zxid 0; /zookeeper/config readable only,
// as ZooKeeper's is.
func systemNode(path []byte) *Node {
	// Empty, not absent: ZooKeeper makes each with new byte[0], and a
	// client reading one (Curator's EnsembleTracker reads
	// /zookeeper/config on every connect) must get a zero-length buffer,
	// not null, which Curator cannot read.
	n := &Node{Key: bytes.Clone(path), Value: []byte{}, Implicit: true}
	if string(path) == "/zookeeper/config" {
		n.ACL = []ACL{{Perms: PermRead, ID: ID{Scheme: "world", ID: "anyone"}}}
	}
	return n
}

// withSystemChildren returns d with the system nodes under path that the
// child index lacks (those not stored) counted among its children.
func withSystemChildren(v View, path []byte, d *Dir) (*Dir, error) {
	var missing int32
	for _, name := range systemChildren(path) {
		n, err := v.Node(JoinPath(path, name))
		if err != nil {
			return nil, err
		}
		if n == nil {
			missing++
		}
	}
	if missing == 0 {
		return d, nil
	}
	var nd Dir
	if d != nil {
		nd = *d
	}
	nd.NumChildren += missing
	return &nd, nil
}

// TreeChildren calls fn with the name of every child ZooKeeper sees under
// a tree path, in byte order, until fn returns false: the child index of v
// with the system nodes merged in.
func TreeChildren(v View, parent []byte, fn func(name []byte) bool) error {
	sys := systemChildren(parent)
	stopped := false
	err := v.Children(parent, func(name []byte) bool {
		for len(sys) > 0 && bytes.Compare(sys[0], name) <= 0 {
			same := bytes.Equal(sys[0], name)
			if !same && !fn(sys[0]) {
				stopped = true
				return false
			}
			sys = sys[1:]
			if same {
				break
			}
		}
		if !fn(name) {
			stopped = true
			return false
		}
		return true
	})
	if err != nil || stopped {
		return err
	}
	for _, name := range sys {
		if !fn(name) {
			return nil
		}
	}
	return nil
}
