package core

// Mode is the ZooKeeper lifetime class of a node. Ephemerality is not a mode:
// a node is ephemeral exactly when it is attached to a lease (a ZooKeeper
// session is a lease), whichever protocol attached it.
type Mode uint8

const (
	ModePersistent Mode = iota
	// ModeContainer nodes are removed by the reaper once they have had
	// children and have none left.
	ModeContainer
	// ModeTTL nodes are removed by the reaper once they are childless and
	// have not been modified for TTL milliseconds.
	ModeTTL
)

// Perm is a ZooKeeper permission bit set.
type Perm int32

const (
	PermRead   Perm = 1
	PermWrite  Perm = 2
	PermCreate Perm = 4
	PermDelete Perm = 8
	PermAdmin  Perm = 16
	PermAll    Perm = 31
)

// ID names an identity in a scheme, as ZooKeeper's Id record does
// (world:anyone, digest:user:hash, ip:10.0.0.0/8, ...).
type ID struct {
	Scheme string
	ID     string
}

// ACL is one ZooKeeper access control entry.
type ACL struct {
	Perms Perm
	ID    ID
}

// Node is one key of the keyspace with everything either protocol knows
// about it. The etcd fields are authoritative for both faces: a ZooKeeper
// version is Version-1, czxid is CreateRev and mzxid is ModRev.
type Node struct {
	Key   []byte
	Value []byte

	CreateRev int64 // revision that created the key (etcd create_revision, ZooKeeper czxid)
	ModRev    int64 // revision of the last change of value or lease (etcd mod_revision, mzxid)
	Version   int64 // number of changes since creation, 1 on create (etcd version; ZooKeeper version + 1)
	Lease     int64 // attached lease or session; 0 for none

	// ZooKeeper metadata. Nodes created through etcd get the zero values
	// except for the times, which every create stamps.
	Ctime    int64 // unix milliseconds, from the entry's time
	Mtime    int64
	Aversion int32
	Mode     Mode
	TTL      int64 // milliseconds, for ModeTTL
	ACL      []ACL // nil means world:anyone with all permissions

	// Implicit marks a synthesized parent that exists only because a node
	// below it does. It is never stored as a Node record; views build it
	// from the Dir record so ZooKeeper clients see a complete tree.
	Implicit bool
}

// Clone returns a deep copy, so callers may keep or modify it.
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Key = append([]byte(nil), n.Key...)
	if n.Value != nil {
		c.Value = append([]byte{}, n.Value...)
	}
	if n.ACL != nil {
		c.ACL = append([]ACL{}, n.ACL...)
	}
	return &c
}

// Dir holds ZooKeeper's per-parent metadata for a tree path that has, or had,
// children. A node with no Dir has never had a child: its cversion is 0, its
// pzxid its czxid and it has no children.
type Dir struct {
	NumChildren int32
	Cversion    int32 // child creates plus child deletes, as ZooKeeper counts
	Pzxid       int64 // revision of the last child create or delete
	// Seq is the number of children ever created under this path: the next
	// sequential suffix. Deletes never give numbers back.
	Seq int32
	// ImplicitRev and ImplicitTime record when an implicit parent appeared,
	// so that it has a stable czxid and ctime while it exists.
	ImplicitRev  int64
	ImplicitTime int64
}

// Lease is an etcd lease or, when Session is set, a ZooKeeper session. Its
// remaining time to live is not replicated state: the leader's lessor keeps
// it, and expiry reaches the log as an explicit LeaseRevoke.
type Lease struct {
	ID  int64
	TTL int64 // seconds, as granted (after raising to the minimum)
	// Session is set for ZooKeeper sessions.
	Session *Session
}

// Session is what a lease carries when it is a ZooKeeper session.
type Session struct {
	TimeoutMs int32
	Password  []byte
}

// Meta is the state-wide bookkeeping that Apply reads and updates.
type Meta struct {
	Rev        int64 // current revision; 1 on a brand-new store
	CompactRev int64 // oldest revision still readable; 0 if never compacted
	// Compacted says a Compact was applied, one to revision 0 too: etcd
	// accepts compacting to 0 once, then refuses it as compacted.
	Compacted bool
	// Alarms are the active alarms, ordered by member then type. They are
	// replicated so that every member lists the same ones.
	Alarms []Alarm
	// Auth is etcd's auth store; nil until first changed (see
	// Meta.AuthState). Apply replaces it, never modifies it.
	Auth *AuthState
}

// AlarmType says what an alarm is about. The values are etcd's AlarmType.
type AlarmType uint8

const (
	AlarmNone    AlarmType = 0
	AlarmNoSpace AlarmType = 1
	// AlarmCorrupt: a corruption check found the member's state differing
	// from the majority's at the same applied index.
	AlarmCorrupt AlarmType = 2
)

func (t AlarmType) String() string {
	switch t {
	case AlarmNoSpace:
		return "NOSPACE"
	case AlarmCorrupt:
		return "CORRUPT"
	}
	return "NONE"
}

// Alarm is one active alarm. Member 0 means the whole cluster (a check
// that found no majority to trust).
type Alarm struct {
	Member uint64
	Type   AlarmType
}

// Stat is ZooKeeper's view of a node's metadata, computed from a Node and its
// Dir (see StatOf).
type Stat struct {
	Czxid          int64
	Mzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	DataLength     int32
	NumChildren    int32
	Pzxid          int64
}

// StatOf computes the ZooKeeper Stat of node n whose Dir is d (nil if none).
func StatOf(n *Node, d *Dir) Stat {
	s := Stat{
		Czxid:      n.CreateRev,
		Mzxid:      n.ModRev,
		Ctime:      n.Ctime,
		Mtime:      n.Mtime,
		Version:    int32(n.Version - 1),
		Aversion:   n.Aversion,
		DataLength: int32(len(n.Value)),
		Pzxid:      n.CreateRev,
	}
	if n.Implicit {
		s.Version = 0
	}
	if n.Mode == ModePersistent {
		s.EphemeralOwner = n.Lease
	}
	if d != nil {
		s.Cversion = d.Cversion
		s.NumChildren = d.NumChildren
		if d.Pzxid != 0 {
			s.Pzxid = d.Pzxid
		}
	}
	return s
}
