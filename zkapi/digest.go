package zkapi

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/januskv/janus/core"
)

// ZooKeeper's digest history (the hash four-letter word): a digest of the
// whole tree, recorded every digestInterval revisions, the last
// digestLogLimit kept, as ZooKeeper's DataTree records its digest log
// (zookeeper.digestLogInterval, zookeeper.digestLogLimit). Operators
// compare it across members: two members whose histories differ at one
// zxid hold different trees. Janus's digests are its own (a sum of a hash
// of each stored node), comparable between Janus members, not with a
// ZooKeeper's.
const (
	digestInterval = 128
	digestLogLimit = 1024
)

// zxidDigest is one entry of the history.
type zxidDigest struct {
	rev    int64
	digest uint64
}

// treeDigest keeps the running digest and its history. The ZooKeeper
// face's event loop owns its updates; hash reads it from any goroutine.
type treeDigest struct {
	mu  sync.Mutex
	sum uint64
	rev int64
	log []zxidDigest
}

// reset starts the running digest over from the state v shows: at start,
// and after the event stream was lost.
func (d *treeDigest) reset(v core.View, rev int64) error {
	var sum uint64
	err := v.Range(nil, nil, func(n *core.Node) bool {
		sum += nodeDigest(n)
		return true
	})
	if err != nil {
		return fmt.Errorf("digest of the tree at revision %d: %w", rev, err)
	}
	d.mu.Lock()
	d.sum, d.rev = sum, rev
	d.mu.Unlock()
	return nil
}

// apply folds one revision's events into the running digest and records
// it when the revision is a multiple of digestInterval. Adding and taking
// away each node's hash makes the digest depend on the set of nodes only,
// not on the order they were written in.
func (d *treeDigest) apply(re core.RevEvents) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ev := range re.Events {
		if ev.Implicit {
			continue // an implicit parent is no stored node
		}
		if ev.Prev != nil && !ev.Prev.Implicit {
			d.sum -= nodeDigest(ev.Prev)
		}
		if ev.Type != core.EventDelete && ev.Node != nil {
			d.sum += nodeDigest(ev.Node)
		}
	}
	d.rev = re.Rev
	if re.Rev%digestInterval == 0 {
		d.log = append(d.log, zxidDigest{rev: re.Rev, digest: d.sum})
		if len(d.log) > digestLogLimit {
			d.log = d.log[len(d.log)-digestLogLimit:]
		}
	}
}

// history renders the hash four-letter word's answer: one line per
// recorded digest, oldest first, as ZooKeeper's DigestCommand prints them
// (the zxid in hexadecimal, the digest as a Java long).
func (d *treeDigest) history() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for _, zd := range d.log {
		fmt.Fprintf(&b, "%x: %d\n", zd.rev, int64(zd.digest))
	}
	return b.String()
}

// current returns the running digest and the revision it is at.
func (d *treeDigest) current() (uint64, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sum, d.rev
}

// nodeDigest hashes what a member stores of a node, so that every member
// holding the same node gets the same hash.
func nodeDigest(n *core.Node) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	num := func(v int64) {
		binary.BigEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	num(int64(len(n.Key)))
	h.Write(n.Key)
	num(int64(len(n.Value)))
	h.Write(n.Value)
	num(n.CreateRev)
	num(n.ModRev)
	num(n.Version)
	num(n.Lease)
	num(int64(n.Aversion))
	num(int64(n.Mode))
	num(n.TTL)
	for _, a := range n.ACL {
		num(int64(a.Perms))
		h.Write([]byte(a.ID.Scheme + ":" + a.ID.ID + "\x00"))
	}
	return h.Sum64()
}
