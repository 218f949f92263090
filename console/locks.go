package console

import (
	"bytes"
	"cmp"
	"regexp"
	"slices"
	"strconv"

	"github.com/januskv/janus/core"
)

// The lock and election recipes the console recognizes, by the names
// their contenders' keys take. Every recipe queues contenders as
// ephemeral (leased) keys under one parent and grants the lock to the
// oldest: sequential znodes by their suffix, etcd's concurrency keys by
// create revision. Sequence numbers are issued in commit order, so both
// orders agree, and the holder's fencing token is its create revision
// (its czxid).
var recipes = []struct {
	name string
	// match the key's last component; its first group, if any, is the
	// sequence suffix.
	re *regexp.Regexp
}{
	// kazoo's Lock and Election (which is a Lock): uuid4().hex, then
	// "__lock__" (or "__rlock__" for a ReadLock) and the suffix.
	{"kazoo Lock/Election", regexp.MustCompile(`^[0-9a-f]{32}__r?lock__(\d{10})$`)},
	// Curator's InterProcessMutex and LeaderSelector (a mutex inside):
	// "_c_" + a UUID (the protected-mode prefix) + "-lock-" + suffix.
	{"Curator InterProcessMutex/LeaderSelector", regexp.MustCompile(`^(?:_c_[0-9a-f-]{36}-)?lock-(\d{10})$`)},
	// Curator's LeaderLatch: "latch-" + suffix, protected the same way.
	{"Curator LeaderLatch", regexp.MustCompile(`^(?:_c_[0-9a-f-]{36}-)?latch-(\d{10})$`)},
}

// etcdRecipe is etcd's concurrency Mutex and Election, and the v3lock
// and v3election services built on them: the key is the prefix plus the
// session's lease ID in hex.
const etcdRecipe = "etcd concurrency Mutex/Election (v3lock, v3election)"

// contender is one key queued for a lock or an election.
type contender struct {
	Key   string `json:"key"`
	Value string `json:"value"` // base64; an election's proposal
	Lease int64  `json:"lease,string"`
	// Token is the fencing token: the key's create revision.
	Token int64 `json:"token"`
	seq   int64
}

// lockView is one lock or election: who holds it, who waits in order.
type lockView struct {
	Prefix  string      `json:"prefix"`
	Recipe  string      `json:"recipe"`
	Holder  contender   `json:"holder"`
	Waiters []contender `json:"waiters"`
}

// maxSubtreeScan bounds the keys one /ui/api/locks or /ui/api/migration
// call reads: past it the answer says it stopped early.
const maxSubtreeScan = 200000

// locks answers /ui/api/locks?prefix=: the locks and elections found
// among the leased keys under prefix.
func (c *Console) locks(r *request) (any, error) {
	prefix := []byte(r.URL.Query().Get("prefix"))
	v, err := c.cfg.Backend.Read(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	type group struct{ prefix, recipe string }
	queues := map[group][]contender{}
	var order []group
	scanned := 0
	err = v.Range(prefix, core.PrefixEnd(prefix), func(n *core.Node) bool {
		scanned++
		if n.Lease == 0 || !c.mayReadNode(r, n) {
			return scanned < maxSubtreeScan
		}
		i := bytes.LastIndexByte(n.Key, '/')
		if i < 0 {
			return scanned < maxSubtreeScan
		}
		parent, name := string(n.Key[:i]), string(n.Key[i+1:])
		ct := contender{Key: string(n.Key), Value: kvOf(n).Value64, Lease: n.Lease, Token: n.CreateRev, seq: n.CreateRev}
		g := group{prefix: parent}
		if name == strconv.FormatInt(n.Lease, 16) {
			g.recipe = etcdRecipe
		}
		for _, rc := range recipes {
			if m := rc.re.FindStringSubmatch(name); m != nil {
				g.recipe = rc.name
				ct.seq, _ = strconv.ParseInt(m[1], 10, 64)
			}
		}
		if g.recipe != "" {
			if _, ok := queues[g]; !ok {
				order = append(order, g)
			}
			queues[g] = append(queues[g], ct)
		}
		return scanned < maxSubtreeScan
	})
	if err != nil {
		return nil, err
	}
	out := []lockView{}
	for _, g := range order {
		q := queues[g]
		slices.SortFunc(q, func(a, b contender) int { return cmp.Compare(a.seq, b.seq) })
		out = append(out, lockView{Prefix: g.prefix, Recipe: g.recipe, Holder: q[0], Waiters: append([]contender{}, q[1:]...)})
	}
	return map[string]any{"rev": v.Rev(), "locks": out, "truncated": scanned >= maxSubtreeScan}, nil
}
