package console

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"github.com/januskv/janus/core"
)

// keyOf reads the key a request names: ?path= (a ZooKeeper path, which
// is also its etcd key), ?key= (an etcd key as text) or ?key64= (an etcd
// key in base64, for keys that are not text).
func keyOf(r *request) ([]byte, error) {
	q := r.URL.Query()
	switch {
	case q.Has("key64"):
		k, err := base64.StdEncoding.DecodeString(q.Get("key64"))
		if err != nil {
			return nil, badRequest("key64 is not base64: " + err.Error())
		}
		return k, nil
	case q.Has("key"):
		return []byte(q.Get("key")), nil
	case q.Has("path"):
		return []byte(q.Get("path")), nil
	}
	return []byte(core.RootPath), nil
}

// intParam reads a non-negative integer parameter, def when absent.
func intParam(r *request, name string, def, max int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, badRequest(name + " must be a non-negative integer")
	}
	return min(n, max), nil
}

// etcdKV is a node as an etcd Range returns it (etcd's JSON names).
type etcdKV struct {
	Key64          string `json:"key"`
	Value64        string `json:"value"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
	// Lease is a string, as in etcd's JSON: lease IDs are 64-bit and
	// JavaScript numbers hold 53.
	Lease int64 `json:"lease,string"`
}

func kvOf(n *core.Node) *etcdKV {
	return &etcdKV{
		Key64:          base64.StdEncoding.EncodeToString(n.Key),
		Value64:        base64.StdEncoding.EncodeToString(n.Value),
		CreateRevision: n.CreateRev,
		ModRevision:    n.ModRev,
		Version:        n.Version,
		Lease:          n.Lease,
	}
}

// zkView is a node as a ZooKeeper client sees it, and what only the
// console adds: whether it is implicit, its mode and TTL.
type zkView struct {
	Path     string    `json:"path"`
	Stat     zkStat    `json:"stat"`
	ACL      []aclView `json:"acl"`
	Mode     string    `json:"mode"`
	TTLMs    int64     `json:"ttlMs,omitempty"`
	Implicit bool      `json:"implicit"`
	System   bool      `json:"system"`
}

// zkStat is ZooKeeper's Stat with the field names zkCli prints;
// ephemeralOwner is a session ID, 64-bit, so it travels as a string.
type zkStat struct {
	Czxid          int64 `json:"czxid"`
	Mzxid          int64 `json:"mzxid"`
	Ctime          int64 `json:"ctime"`
	Mtime          int64 `json:"mtime"`
	Version        int32 `json:"version"`
	Cversion       int32 `json:"cversion"`
	Aversion       int32 `json:"aversion"`
	EphemeralOwner int64 `json:"ephemeralOwner,string"`
	DataLength     int32 `json:"dataLength"`
	NumChildren    int32 `json:"numChildren"`
	Pzxid          int64 `json:"pzxid"`
}

func statOf(n *core.Node, d *core.Dir) zkStat {
	s := core.StatOf(n, d)
	return zkStat{Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version, Cversion: s.Cversion,
		Aversion: s.Aversion, EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren, Pzxid: s.Pzxid}
}

// aclView is one ACL entry with ZooKeeper's permission letters.
type aclView struct {
	Perms  string `json:"perms"`
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

// permLetters writes a permission set as zkCli's getAcl does (cdrwa).
func permLetters(p core.Perm) string {
	var b strings.Builder
	for _, l := range []struct {
		bit    core.Perm
		letter byte
	}{{core.PermCreate, 'c'}, {core.PermDelete, 'd'}, {core.PermRead, 'r'}, {core.PermWrite, 'w'}, {core.PermAdmin, 'a'}} {
		if p&l.bit != 0 {
			b.WriteByte(l.letter)
		}
	}
	return b.String()
}

func aclOf(acl []core.ACL) []aclView {
	if acl == nil {
		return []aclView{{Perms: "cdrwa", Scheme: "world", ID: "anyone"}}
	}
	out := make([]aclView, len(acl))
	for i, a := range acl {
		out[i] = aclView{Perms: permLetters(a.Perms), Scheme: a.ID.Scheme, ID: a.ID.ID}
	}
	return out
}

func modeName(m core.Mode) string {
	switch m {
	case core.ModeContainer:
		return "container"
	case core.ModeTTL:
		return "ttl"
	}
	return "persistent"
}

// leaseView is the lease or session a node is attached to.
type leaseView struct {
	ID          int64  `json:"id,string"`
	IDHex       string `json:"idHex"`
	TTL         int64  `json:"ttl"`
	RemainingMs int64  `json:"remainingMs"`
	Session     bool   `json:"session"`
}

// nodeAnswer is both views of one key.
type nodeAnswer struct {
	Rev    int64  `json:"rev"`
	Key    string `json:"key"`
	Key64  string `json:"key64"`
	IsPath bool   `json:"isPath"`
	Exists bool   `json:"exists"`
	// Hidden says the user may not read this node, only walk through it
	// to keys below that it may read.
	Hidden bool       `json:"hidden,omitempty"`
	Etcd   *etcdKV    `json:"etcd"`
	ZK     *zkView    `json:"zk"`
	Lease  *leaseView `json:"lease,omitempty"`
}

// node answers /ui/api/node: what an etcd Range and a ZooKeeper getData
// and getACL would each return for one key.
func (c *Console) node(r *request) (any, error) {
	key, err := keyOf(r)
	if err != nil {
		return nil, err
	}
	a := nodeAnswer{Key: string(key), Key64: base64.StdEncoding.EncodeToString(key), IsPath: core.IsTreePath(key)}
	if !c.mayRead(r, key, nil) {
		if a.IsPath && c.mayBrowse(r, key) {
			// A node on the way to what the user may read: it may walk
			// through, but not look inside.
			a.Hidden = true
			return a, nil
		}
		return nil, &apiError{403, "etcdserver: permission denied"}
	}
	v, err := c.cfg.Backend.Read(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	a.Rev = v.Rev()
	var n *core.Node
	if a.IsPath {
		tn, d, err := core.TreeNode(v, key)
		if err != nil {
			return nil, err
		}
		if tn != nil {
			n = tn
			system := core.IsSystemPath(key)
			a.ZK = &zkView{Path: string(key), Stat: statOf(tn, d), ACL: aclOf(tn.ACL), Mode: modeName(tn.Mode),
				Implicit: tn.Implicit && !system, System: system}
			if tn.Mode == core.ModeTTL {
				a.ZK.TTLMs = tn.TTL
			}
		}
	} else if n, err = v.Node(key); err != nil {
		return nil, err
	}
	if n == nil {
		return a, nil
	}
	if !c.mayReadNode(r, n) {
		return nil, &apiError{403, "etcdserver: permission denied"}
	}
	a.Exists = true
	if !n.Implicit && !(a.ZK != nil && a.ZK.System && n.CreateRev == 0) {
		a.Etcd = kvOf(n)
	}
	if n.Lease != 0 {
		if a.Lease, err = c.leaseOf(v, n.Lease); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (c *Console) leaseOf(v core.View, id int64) (*leaseView, error) {
	l, err := v.Lease(id)
	if err != nil || l == nil {
		return nil, err
	}
	rem, _ := c.cfg.Backend.Leases().Remaining(id)
	return &leaseView{ID: id, IDHex: strconv.FormatInt(id, 16), TTL: l.TTL, RemainingMs: rem, Session: l.Session != nil}, nil
}

// childView is one row of the tree: enough to draw it without opening it.
type childView struct {
	Name        string `json:"name"`
	Path        string `json:"path"`
	NumChildren int32  `json:"numChildren"`
	DataLength  int32  `json:"dataLength"`
	Ephemeral   bool   `json:"ephemeral"`
	Implicit    bool   `json:"implicit"`
	System      bool   `json:"system"`
	Mode        string `json:"mode"`
}

// childrenAnswer is one page of a node's children.
type childrenAnswer struct {
	Rev int64 `json:"rev"`
	// Total is how many children match (all of them without ?q=); rows
	// at Offset follow, so a virtual list can fetch any window.
	Total    int         `json:"total"`
	Offset   int         `json:"offset"`
	Children []childView `json:"children"`
}

// maxPage bounds a page of rows, so no request reads an unbounded list
// into memory.
const maxPage = 1000

// children answers /ui/api/children?path=&offset=&limit=&q=: a window of
// the children ZooKeeper lists under path, in its byte order, with ?q= a
// name prefix. Names are streamed from the child index, so a parent with
// 100,000 children costs one pass over names per page, never the nodes.
func (c *Console) children(r *request) (any, error) {
	path, err := keyOf(r)
	if err != nil {
		return nil, err
	}
	if !core.IsTreePath(path) {
		return nil, badRequest("not a ZooKeeper path: " + strconv.Quote(string(path)))
	}
	offset, err := intParam(r, "offset", 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 100, maxPage)
	if err != nil {
		return nil, err
	}
	q := []byte(r.URL.Query().Get("q"))
	v, err := c.cfg.Backend.Read(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	a := childrenAnswer{Rev: v.Rev(), Offset: offset, Children: []childView{}}
	var names [][]byte
	err = core.TreeChildren(v, path, func(name []byte) bool {
		if !bytes.HasPrefix(name, q) || !c.mayBrowse(r, core.JoinPath(path, name)) {
			return true
		}
		if a.Total >= offset && len(names) < limit {
			names = append(names, append([]byte(nil), name...))
		}
		a.Total++
		return true
	})
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		p := core.JoinPath(path, name)
		n, d, err := core.TreeNode(v, p)
		if err != nil {
			return nil, err
		}
		if n == nil {
			continue // gone between the listing and the read: cannot happen in one View
		}
		s := core.StatOf(n, d)
		a.Children = append(a.Children, childView{Name: string(name), Path: string(p), NumChildren: s.NumChildren,
			DataLength: s.DataLength, Ephemeral: n.Lease != 0, Implicit: n.Implicit && !core.IsSystemPath(p), System: core.IsSystemPath(p),
			Mode: modeName(n.Mode)})
	}
	return a, nil
}

// mayBrowse reports whether the user may see that a tree path exists: it
// may read the key, or something below it (so a user allowed /app/x/ can
// walk down from the root to it).
func (c *Console) mayBrowse(r *request, path []byte) bool {
	st := c.cfg.Backend.Auth()
	if !st.Enabled || st.Permitted(r.user, path, nil, core.AuthRead) {
		return true
	}
	below := []byte(core.RootPath)
	if string(path) != core.RootPath {
		below = append(append(below[:0:0], path...), '/')
	}
	return readOverlaps(st, r.user, below, core.PrefixEnd(below))
}

// readOverlaps reports whether any read permission of the user's roles
// touches [key, end).
func readOverlaps(st *core.AuthState, user string, key, end []byte) bool {
	u := st.User(user)
	if u == nil {
		return false
	}
	if st.IsRoot(user) {
		return true
	}
	for _, name := range u.Roles {
		role := st.Role(name)
		if role == nil {
			continue
		}
		for _, p := range role.Perms {
			if p.Type != core.AuthRead && p.Type != core.AuthReadWrite {
				continue
			}
			pEnd := p.End
			if len(pEnd) == 0 {
				pEnd = append(append([]byte(nil), p.Key...), 0)
			}
			// [p.Key, pEnd) meets [key, end); "\x00" as an end means to
			// the end of the keyspace, as in etcd.
			openEnded := len(p.End) == 1 && p.End[0] == 0
			if (openEnded || bytes.Compare(key, pEnd) < 0) && (end == nil || bytes.Compare(p.Key, end) < 0) {
				return true
			}
		}
	}
	return false
}

// keysAnswer is one page of the keys ZooKeeper cannot see.
type keysAnswer struct {
	Rev  int64    `json:"rev"`
	Keys []string `json:"keys"` // base64
	// Next is the key64 to continue from, "" at the end of the keyspace.
	Next string `json:"next"`
}

// maxScan bounds how many keys one /ui/api/keys call examines, so a store
// of mostly tree paths costs several short requests, not one long one.
const maxScan = 20000

// keys answers /ui/api/keys?after64=&limit=: the etcd keys that are not
// ZooKeeper paths (no leading '/', empty components, a trailing '/',
// characters ZooKeeper forbids), which only etcd clients see.
func (c *Console) keys(r *request) (any, error) {
	limit, err := intParam(r, "limit", 100, maxPage)
	if err != nil {
		return nil, err
	}
	start, err := afterParam(r, nil)
	if err != nil {
		return nil, err
	}
	v, err := c.cfg.Backend.Read(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	a := keysAnswer{Rev: v.Rev(), Keys: []string{}}
	kept, _, next, err := scanPage(v, start, nil, limit, func(n *core.Node) bool {
		return !core.IsTreePath(n.Key) && c.mayReadNode(r, n)
	})
	if err != nil {
		return nil, err
	}
	for _, n := range kept {
		a.Keys = append(a.Keys, base64.StdEncoding.EncodeToString(n.Key))
	}
	a.Next = next
	return a, nil
}

// afterParam reads the ?after64= cursor of a paged scan that starts at
// start: the scan resumes just past the cursor's key, or at start if that
// is further on.
func afterParam(r *request, start []byte) ([]byte, error) {
	s := r.URL.Query().Get("after64")
	if s == "" {
		return start, nil
	}
	after, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, badRequest("after64 is not base64")
	}
	if after = append(after, 0); bytes.Compare(after, start) > 0 {
		return after, nil
	}
	return start, nil
}

// scanPage ranges over [start, end) and keeps the nodes keep accepts, up
// to limit of them, examining at most maxScan keys. It returns how many
// it examined and the cursor (key64) to continue after, "" when the range
// is done.
func scanPage(v core.View, start, end []byte, limit int, keep func(*core.Node) bool) (kept []*core.Node, scanned int, next string, err error) {
	var last []byte
	err = v.Range(start, end, func(n *core.Node) bool {
		scanned++
		last = n.Key
		if keep(n) {
			kept = append(kept, n)
		}
		return len(kept) < limit && scanned < maxScan
	})
	if err != nil {
		return nil, 0, "", err
	}
	if len(kept) >= limit || scanned >= maxScan {
		next = base64.StdEncoding.EncodeToString(last)
	}
	return kept, scanned, next, nil
}

// version is one version of a key in its history.
type version struct {
	*etcdKV
	Deleted bool `json:"deleted,omitempty"`
}

// historyAnswer is a key's versions, newest first.
type historyAnswer struct {
	Versions []version `json:"versions"`
	// Compacted says older versions existed but compaction removed them.
	Compacted bool `json:"compacted"`
}

// maxVersions bounds how far back one history request walks.
const maxVersions = 50

// history answers /ui/api/history: the key's versions from the latest
// back to its creation, reading the store at each older revision as an
// etcd Range with a revision would, until compaction cuts it off.
func (c *Console) history(r *request) (any, error) {
	key, err := keyOf(r)
	if err != nil {
		return nil, err
	}
	if !c.mayRead(r, key, nil) {
		return nil, &apiError{403, "etcdserver: permission denied"}
	}
	a := historyAnswer{Versions: []version{}}
	rev := int64(0)
	for len(a.Versions) < maxVersions {
		v, err := c.cfg.Backend.Read(r.Context(), rev)
		if err != nil {
			if errors.Is(err, core.ErrCompacted) {
				a.Compacted = true
				return a, nil
			}
			return nil, err
		}
		n, err := v.Node(key)
		v.Close()
		if err != nil {
			return nil, err
		}
		if n == nil {
			return a, nil
		}
		if !c.mayReadNode(r, n) {
			return nil, &apiError{403, "etcdserver: permission denied"}
		}
		a.Versions = append(a.Versions, version{etcdKV: kvOf(n)})
		if n.Version <= 1 {
			return a, nil
		}
		rev = n.ModRev - 1
	}
	return a, nil
}
