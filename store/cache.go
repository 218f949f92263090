package store

// recordCache holds the latest stored encoding of recently read or written
// records of one kind (node records, Dir records), keyed by the record's key
// without its prefix, so that Apply does not ask Badger for hot keys: a
// Badger Get walks the memtables and, for a key last written before the
// latest memtable flush, the table levels, and was the largest single cost
// of applying a put.
//
// It describes the state at the applied index and only Apply uses it: Apply
// adds the records it finds at the applied index, and after a group's
// applied index is written it updates the keys the group wrote that are
// cached. A cached nil encoding means the record is absent. Since every
// change of the latest state goes through Apply (or RestoreSnapshot, which
// drops the cache), an entry is never stale. A failed group changes nothing
// in it: what it read is still the state at the unchanged applied index.
//
// Only records read back are admitted, not absent keys nor new records:
// loading many new keys (a create workload, a bulk load) would otherwise
// fill the cache with records that are not read again, and the memory with
// them, while a key that is rewritten is read from Badger once and then
// stays. The one absence admitted is that of a stored node's Dir record
// (a leaf's), which every setData of the node reads again (see
// applyBase.isNode).
//
// Eviction is by generations: entries go into the current map, and when it
// holds half the budget it becomes the old map and the previous old map is
// dropped. A hit in the old map moves the entry to the current one. So the
// cache holds at most about the budget, needs no per-entry bookkeeping, and
// keeps what is used at least once per half a budget of traffic.
type recordCache struct {
	half     int64 // bytes per generation
	cur, old map[string][]byte
	curBytes int64
}

// cacheEntryOverhead approximates what one entry costs beyond its key and
// value bytes: the map slot, the string and slice headers.
const cacheEntryOverhead = 64

func newRecordCache(budget int64) *recordCache {
	c := &recordCache{half: budget / 2}
	c.reset()
	return c
}

// reset drops everything.
func (c *recordCache) reset() {
	c.cur, c.old, c.curBytes = map[string][]byte{}, nil, 0
}

// get returns the cached encoding of key (nil: absent) and whether key is
// cached.
func (c *recordCache) get(key []byte) ([]byte, bool) {
	if c.half <= 0 {
		return nil, false
	}
	if enc, ok := c.cur[string(key)]; ok {
		return enc, true
	}
	enc, ok := c.old[string(key)]
	if ok {
		c.put(key, enc)
	}
	return enc, ok
}

// update records enc (nil: absent) as the latest encoding of key if key is
// cached. enc must not be modified afterwards.
func (c *recordCache) update(key, enc []byte) {
	if c.half <= 0 {
		return
	}
	_, ok := c.cur[string(key)]
	if !ok {
		_, ok = c.old[string(key)]
	}
	if ok {
		c.put(key, enc)
	}
}

// put records enc (nil: absent) as key's latest encoding. enc must not be
// modified afterwards.
func (c *recordCache) put(key, enc []byte) {
	if c.half <= 0 {
		return
	}
	size := int64(len(key)+len(enc)) + cacheEntryOverhead
	if prev, ok := c.cur[string(key)]; ok {
		c.curBytes -= int64(len(key)+len(prev)) + cacheEntryOverhead
	}
	c.cur[string(key)] = enc
	c.curBytes += size
	if c.curBytes >= c.half {
		// The next generation will likely hold as many entries: sizing it
		// so spares growing it step by step.
		c.old, c.cur, c.curBytes = c.cur, make(map[string][]byte, len(c.cur)), 0
	}
}
