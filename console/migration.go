package console

import (
	"strings"

	"github.com/januskv/janus/core"
)

// finding is one kind of node that would not survive a move, with a few
// examples.
type finding struct {
	Kind     string   `json:"kind"`
	Why      string   `json:"why"`
	Count    int      `json:"count"`
	Examples []string `json:"examples"`
}

// readiness is what a move of one subtree to pure etcd or pure ZooKeeper
// would lose, and the commands that make the move.
type readiness struct {
	Rev       int64     `json:"rev"`
	Prefix    string    `json:"prefix"`
	Scanned   int       `json:"scanned"`
	Truncated bool      `json:"truncated"`
	ToEtcd    []finding `json:"toEtcd"`
	ToZK      []finding `json:"toZooKeeper"`
	EtcdCmd   string    `json:"etcdCommand"`
	ZKCmd     string    `json:"zkCommand"`
}

// maxExamples bounds the keys named per finding.
const maxExamples = 10

// migration answers /ui/api/migration?prefix=: for the stored nodes under
// prefix, what pure etcd could not hold (what janus migrate --dry-run
// would report skipping or changing) and what pure ZooKeeper could not,
// with the migrate commands for both directions.
func (c *Console) migration(r *request) (any, error) {
	prefix := r.URL.Query().Get("prefix")
	v, err := c.cfg.Backend.Read(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	toEtcd := []*finding{
		{Kind: "ephemeral", Why: "ZooKeeper ephemerals belong to live sessions: migrate skips them, their owners recreate them"},
		{Kind: "container", Why: "etcd has no container nodes: the key stays after its last child goes"},
		{Kind: "ttl", Why: "etcd has no TTL nodes: the key never expires (a lease would, but from the move, not from the last change)"},
		{Kind: "acl", Why: "ZooKeeper ACLs other than world:anyone; etcd's roles cannot express them"},
	}
	toZK := []*finding{
		{Kind: "non-path key", Why: "not a ZooKeeper path: a ZooKeeper server cannot hold it"},
		{Kind: "leased key", Why: "attached to an etcd lease: migrate skips it, its owner recreates it"},
		{Kind: "large value", Why: "over 1 MiB, ZooKeeper's default jute.maxbuffer: refused unless the target raises it"},
	}
	note := func(f *finding, key []byte) {
		f.Count++
		if len(f.Examples) < maxExamples {
			f.Examples = append(f.Examples, string(key))
		}
	}
	a := readiness{Rev: v.Rev(), Prefix: prefix}
	err = v.Range([]byte(prefix), core.PrefixEnd([]byte(prefix)), func(n *core.Node) bool {
		a.Scanned++
		if !c.mayReadNode(r, n) {
			return a.Scanned < maxSubtreeScan
		}
		session := false
		if n.Lease != 0 {
			l, err := v.Lease(n.Lease)
			session = err == nil && l != nil && l.Session != nil
		}
		switch {
		case session:
			note(toEtcd[0], n.Key)
		case n.Lease != 0:
			note(toZK[1], n.Key)
		}
		switch n.Mode {
		case core.ModeContainer:
			note(toEtcd[1], n.Key)
		case core.ModeTTL:
			note(toEtcd[2], n.Key)
		}
		if !worldAnyone(n.ACL) {
			note(toEtcd[3], n.Key)
		}
		if !core.IsTreePath(n.Key) {
			note(toZK[0], n.Key)
		}
		if len(n.Value) > 1<<20 {
			note(toZK[2], n.Key)
		}
		return a.Scanned < maxSubtreeScan
	})
	if err != nil {
		return nil, err
	}
	a.Truncated = a.Scanned >= maxSubtreeScan
	for _, f := range toEtcd {
		if f.Count > 0 {
			a.ToEtcd = append(a.ToEtcd, *f)
		}
	}
	for _, f := range toZK {
		if f.Count > 0 {
			a.ToZK = append(a.ToZK, *f)
		}
	}
	etcdAddr, zkAddr := "JANUS_ETCD", "JANUS_ZK"
	st := c.cfg.Backend.Status()
	for _, m := range st.Members {
		if m.ID == st.MemberID {
			etcdAddr, zkAddr = hostPort(m.EtcdURL), m.ZKAddr
		}
	}
	a.EtcdCmd = "janus migrate --dry-run --from etcd://" + etcdAddr + pathSuffix(prefix) + " --to etcd://TARGET:2379"
	zkPath := prefix
	if !core.IsTreePath([]byte(zkPath)) {
		zkPath = "/"
	}
	a.ZKCmd = "janus migrate --dry-run --from zk://" + zkAddr + pathSuffix(zkPath) + " --to zk://TARGET:2181"
	return a, nil
}

// worldAnyone reports whether an ACL is ZooKeeper's open one, which is
// what etcd keys have.
func worldAnyone(acl []core.ACL) bool {
	return acl == nil || (len(acl) == 1 && acl[0].ID.Scheme == "world" && acl[0].ID.ID == "anyone" && acl[0].Perms == core.PermAll)
}

// hostPort strips a URL's scheme.
func hostPort(u string) string {
	return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
}

// pathSuffix is the /path or /prefix part of a migrate endpoint, which
// starts with '/'; any other prefix (and "/") means everything.
func pathSuffix(p string) string {
	if p == "/" || !strings.HasPrefix(p, "/") {
		return ""
	}
	return p
}
