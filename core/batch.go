package core

// EventType says what happened to a key.
type EventType uint8

const (
	EventPut EventType = iota
	EventDelete
)

// Event is one change at one revision, as both faces' watches need it.
type Event struct {
	Type EventType
	// Node is the key's new state for a put; for a delete only Key and
	// ModRev (the deleting revision) are set, as etcd reports it.
	Node *Node
	// Prev is the key's state before the change, nil if it did not exist.
	Prev *Node
	// Implicit events are seen only by ZooKeeper clients: an implicit
	// parent appeared (put) or vanished (delete).
	Implicit bool
	// WasImplicit marks a put that turned an implicit parent into a stored
	// node: etcd sees a create (no Prev), ZooKeeper a data change of a node
	// it already saw.
	WasImplicit bool
}

// NodeWrite sets (Node != nil) or deletes (Node == nil) a stored node.
type NodeWrite struct {
	Key  []byte
	Node *Node
}

// DirWrite sets or deletes (Dir == nil) a tree path's child metadata.
type DirWrite struct {
	Path []byte
	Dir  *Dir
}

// ChildWrite adds or removes one entry of the child index.
type ChildWrite struct {
	Parent  []byte
	Name    []byte
	Present bool
}

// LeaseWrite sets or deletes (Lease == nil) a lease record.
type LeaseWrite struct {
	ID    int64
	Lease *Lease
}

// LeaseKeyWrite adds or removes a key from a lease's attached set.
type LeaseKeyWrite struct {
	ID      int64
	Key     []byte
	Present bool
}

// Batch is everything applying one entry changes, for the store to write
// atomically with the entry's index and for the watch hub to publish.
type Batch struct {
	Index uint64
	Time  int64
	// Rev is the revision after the entry. Changed says whether the entry
	// created it (wrote at least one node).
	Rev     int64
	Changed bool

	Nodes     []NodeWrite
	Dirs      []DirWrite
	Children  []ChildWrite
	Leases    []LeaseWrite
	LeaseKeys []LeaseKeyWrite
	Meta      *Meta // set when the bookkeeping changed
	// Compact is the new compact revision when the entry compacted.
	Compact int64
	// Events in op order; all at Rev.
	Events []Event
	// Origin is the entry's op's Origin, for the watchers of Events.
	Origin Origin
	// EventBytes bounds the size of the event record the store keeps for
	// Events; Apply refuses an entry for which it passes MaxRecordBytes.
	EventBytes int
}
