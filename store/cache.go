package store

import (
	"sync"
	"unsafe"

	"github.com/januskv/janus/core"
)

// recordCache holds the latest stored encoding of recently read or written
// records of one kind (node records, Dir records), keyed by the record's key
// without its prefix, so that neither Apply nor a reader of the latest state
// asks Badger for hot keys: a Badger Get walks the memtables and, for a key
// last written before the latest memtable flush, the table levels. It was
// the largest single cost of applying a put, and two of them (a node and
// its Dir) were most of a ZooKeeper getData's.
//
// The cache describes the state at one applied index, at, which the applier
// moves forward in step with the state it publishes: after a group's
// applied index is written and before readers are shown it, the applier
// updates every cached key the group wrote and sets at to the group's
// index, under the cache's lock (see groupWrites.cache). Every change of
// the latest state goes through Apply, or through a reload (RestoreSnapshot,
// SkipTo), which empties the cache.
//
// An entry also says from which applied index on it holds: since. The
// invariant is that an entry's encoding is its key's record at every
// applied index from since to at. So a reader of the state at index A (a
// published state, or the index a View of an older revision reads at) may
// use an entry only if since <= A (and A <= at holds, since the cache moves
// before the state readers see does): a reader that still holds the state
// before a group, or one inside it, sees the group's writes as misses and
// reads Badger at its own index, never a record it must not see yet. A reader
// adds what it read from Badger at A only while at is still A, as an entry
// since A; the applier's next update, which comes after under the same
// lock, replaces it if the group wrote the key. A failed group changes
// nothing in it: the applier updates the cache only once the group is
// ready to publish.
//
// Only records read back are admitted, not absent keys nor new records:
// loading many new keys (a create workload, a bulk load) would otherwise
// fill the cache with records that are not read again, and the memory with
// them, while a key that is rewritten or read is read from Badger once and
// then stays. The one absence admitted is that of a stored node's Dir
// record (a leaf's), which every getData and setData of the node reads
// again (see applyBase.isNode and View.Dir).
//
// Eviction is by generations: entries go into the current map, and when it
// holds half the budget it becomes the old map and the previous old map is
// dropped. A hit in the old map moves the entry to the current one. So the
// cache holds at most about the budget, needs no per-entry bookkeeping, and
// keeps what is used at least once per half a budget of traffic.
type recordCache struct {
	half int64 // bytes per generation; <= 0 turns the cache off

	mu       sync.Mutex
	at       uint64 // the applied index the cache describes
	cur, old map[string]cacheEntry
	curBytes int64
}

// cacheEntry is one key's record (enc nil: absent) at every applied index
// from since to the cache's at.
type cacheEntry struct {
	enc   []byte
	since uint64
	// node is enc decoded, once a reader of a node record has decoded it
	// (see View.Node); its Value is a part of enc. Readers share it and
	// hand out copies of the struct, so neither is ever modified.
	node *core.Node
}

// size is what the entry of key costs the cache's budget.
func (e cacheEntry) size(key []byte) int64 {
	n := int64(len(key)+len(e.enc)) + cacheEntryOverhead
	if e.node != nil {
		n += int64(unsafe.Sizeof(core.Node{})) + int64(len(e.node.Key)) +
			int64(len(e.node.ACL))*int64(unsafe.Sizeof(core.ACL{}))
	}
	return n
}

// cacheEntryOverhead approximates what one entry costs beyond its key and
// value bytes: the map slot, the string and slice headers, since.
const cacheEntryOverhead = 72

func newRecordCache(budget int64) *recordCache {
	c := &recordCache{half: budget / 2}
	c.reset(0)
	return c
}

// reset drops everything: the cache describes the state at applied index
// at, holding none of it.
func (c *recordCache) reset(at uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.cur, c.old, c.curBytes = at, map[string]cacheEntry{}, nil, 0
}

// get returns the cached encoding of key (nil: absent) at applied index at,
// and whether the cache knows it. at must not be above the cache's.
func (c *recordCache) get(key []byte, at uint64) ([]byte, bool) {
	e, ok := c.entry(key, at)
	return e.enc, ok
}

// entry returns the cache's entry of key at applied index at, and whether
// the cache knows it. at must not be above the cache's.
func (c *recordCache) entry(key []byte, at uint64) (cacheEntry, bool) {
	if c.half <= 0 {
		return cacheEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[string(key)]
	if !ok {
		if e, ok = c.old[string(key)]; ok {
			c.putLocked(key, e)
		}
	}
	if !ok || e.since > at {
		return cacheEntry{}, false
	}
	return e, true
}

// keepDecoded attaches n, decoded from enc, to key's entry if that entry
// still holds enc itself (not an equal copy read by another reader, nor a
// later record). n and enc must not be modified afterwards.
func (c *recordCache) keepDecoded(key, enc []byte, n *core.Node) {
	if c.half <= 0 || len(enc) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[string(key)]
	if !ok || e.node != nil || len(e.enc) != len(enc) || &e.enc[0] != &enc[0] {
		return
	}
	e.node = n
	c.putLocked(key, e)
}

// add admits enc (nil: absent), read at applied index at, as key's record,
// unless the cache has moved past at. enc must not be modified afterwards.
func (c *recordCache) add(key, enc []byte, at uint64) {
	if c.half <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at != at {
		return
	}
	c.putLocked(key, cacheEntry{enc: enc, since: at})
}

// advance moves the cache to applied index at: each call of set records
// enc (nil: absent) as the record of key from at on, if key is cached;
// records it is not called for keep their entries. Calls for one key come
// in write order: the last wins. enc must not be modified afterwards.
func (c *recordCache) advance(at uint64, writes func(set func(key, enc []byte))) {
	if c.half <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	writes(func(key, enc []byte) {
		_, ok := c.cur[string(key)]
		if !ok {
			_, ok = c.old[string(key)]
		}
		if ok {
			c.putLocked(key, cacheEntry{enc: enc, since: at})
		}
	})
	c.at = at
}

// putLocked records e as key's entry in the current generation.
func (c *recordCache) putLocked(key []byte, e cacheEntry) {
	size := e.size(key)
	if prev, ok := c.cur[string(key)]; ok {
		c.curBytes -= prev.size(key)
	}
	c.cur[string(key)] = e
	c.curBytes += size
	if c.curBytes >= c.half {
		// The next generation will likely hold as many entries: sizing it
		// so spares growing it step by step.
		c.old, c.cur, c.curBytes = c.cur, make(map[string]cacheEntry, len(c.cur)), 0
	}
}
