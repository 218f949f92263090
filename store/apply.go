package store

import (
	"bytes"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

// applyBase is the View Apply's overlay reads: Badger at the applied index,
// so that writes a crash left above it are invisible. It remembers the node
// records it read, raw and decoded, for the event recorder: handing out the
// same decoded node each time lets the recorder see that an event's Prev is
// exactly the stored record without encoding it again.
type applyBase struct {
	reader
	raw       map[string]baseNode
	dirs      map[string][]byte // tree path -> stored Dir encoding, nil if absent
	nodeCache *recordCache
	dirCache  *recordCache
	// applied is the applied index the reader reads at.
	applied uint64
}

// baseNode is a node record as stored at the applied index.
type baseNode struct {
	enc  []byte     // stored encoding, nil if absent
	node *core.Node // decoded, once asked for
}

func (b *applyBase) Node(key []byte) (*core.Node, error) {
	rec, err := b.lookup(key)
	if err != nil || rec.enc == nil {
		return nil, err
	}
	if rec.node == nil {
		// enc is never modified (see recordCache), so the node may share
		// its value instead of copying it.
		if rec.node, err = core.DecodeNodeShared(bytes.Clone(key), rec.enc); err != nil {
			return nil, err
		}
		b.raw[string(key)] = rec
	}
	return rec.node, nil
}

func (b *applyBase) lookup(key []byte) (baseNode, error) {
	if rec, ok := b.raw[string(key)]; ok {
		return rec, nil
	}
	enc, ok := b.nodeCache.get(key, b.applied)
	if !ok {
		var err error
		if enc, err = b.get(nodeKey(key)); err != nil {
			return baseNode{}, err
		}
		if enc != nil {
			b.nodeCache.add(key, enc, b.applied)
		}
	}
	rec := baseNode{enc: enc}
	b.raw[string(key)] = rec
	return rec, nil
}

// HasChild is the reader's, and keeps what a "no" implies. A path other
// than a system node's that is not in its parent's child index is not in
// the tree, and so has no node record (core keeps the two in step, and its
// tests check that after every group). A create asks HasChild and nothing
// else of its own path (see core's inTree), so without this the event
// recorder and the census would then ask Badger for the node record, and a
// lookup of an absent key is Badger's dearest: every memtable, every
// level's filter.
func (b *applyBase) HasChild(parent, name []byte) (bool, error) {
	ok, err := b.reader.HasChild(parent, name)
	if err != nil || ok {
		return ok, err
	}
	path := core.JoinPath(parent, name)
	if _, seen := b.raw[string(path)]; !seen && !core.IsSystemPath(path) {
		b.raw[string(path)] = baseNode{}
	}
	return false, nil
}

func (b *applyBase) Dir(path []byte) (*core.Dir, error) {
	enc, ok := b.dirs[string(path)]
	if !ok {
		if enc, ok = b.dirCache.get(path, b.applied); !ok {
			var err error
			if enc, err = b.get(dirKey(path)); err != nil {
				return nil, err
			}
			if enc != nil || b.isNode(path) {
				b.dirCache.add(path, enc, b.applied)
			}
		}
		// A create reads its own path's (absent) Dir twice.
		b.dirs[string(path)] = enc
	}
	if enc == nil {
		return nil, nil
	}
	return core.DecodeDir(enc)
}

// isNode reports whether the node record at key was read and found at the
// applied index. A stored node's absent Dir is cached (see Dir): a
// setData or a delete reads its node and then its Dir, which most nodes,
// having no children, lack, and a Badger lookup of a key it does not hold
// searches every memtable and level. The absence of the
// Dir of a path that has no node yet is not cached, for the same reason
// new records are not (see recordCache): a bulk create reads each such
// path once.
func (b *applyBase) isNode(key []byte) bool {
	rec, ok := b.raw[string(key)]
	return ok && rec.enc != nil
}

// groupWrites is what one Apply call writes, built before any of it is.
type groupWrites struct {
	batches []*core.Batch
	events  [][]byte   // event record per batch, nil when it made no revision
	encs    [][][]byte // per batch, the encoding of each NodeWrite (nil: delete)
	dirEncs [][][]byte // per batch, the encoding of each DirWrite (nil: delete)
	encAll  [][]byte   // the storage encs and dirEncs are windows of
	// nodes holds every node the group wrote so far, with its encoding
	// (nil node and encoding for a delete): the state later entries see.
	nodes map[string]baseNode
	// leases holds every lease the group wrote so far (nil: revoked).
	leases map[int64]*core.Lease
	// census is how the group changes the state's counts.
	census core.Census
	// revIndex maps the revisions the group created to their entries.
	revIndex map[int64]uint64
	// lastMeta is the position in batches of the last batch that changed
	// core.Meta, -1 if none did.
	lastMeta int
	// lastDir holds, per tree path, the position in batches of the last
	// batch that wrote its Dir record: only that write is stored.
	lastDir map[string]int
}

// Apply applies a group of committed entries in order and makes their
// effects visible to readers. It must be called from one goroutine at a
// time. Entry indexes must increase, starting above AppliedIndex.
//
// The group's batches are written to Badger at their entries' indexes
// first, the applied index after them, and only then is the new state
// published to readers. A crash in between leaves writes above the applied
// index that no read sees; replaying the same entries rewrites them
// identically. An error leaves the published state as it was, but the
// caller must stop applying: the state machine could not read its state.
func (s *Store) Apply(entries []core.Entry) ([]*core.Result, []*core.Batch, error) {
	return s.ApplyWhen(entries, nil)
}

// ApplyWhen is Apply for entries that are not yet durable elsewhere: it
// writes the group to Badger, then calls ready and publishes the new state
// only once ready returns nil. A single member passes the wait for its own
// log's fdatasync as ready, so that Badger's write overlaps the disk flush
// instead of following it, while readers still see nothing the log could
// lose. If ready fails nothing is published and, as for any error, the
// caller must stop applying. ready nil means the entries are durable
// already.
//
// A crash after the Badger write and before the log's flush can leave
// Badger holding (at an applied index the log lacks) entries that were
// never acknowledged; a member that finds its state ahead of its log starts
// a new log after it (see zab), so they count as writes that happened but
// whose reply was lost.
func (s *Store) ApplyWhen(entries []core.Entry, ready func() error) ([]*core.Result, []*core.Batch, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return nil, nil, ErrClosed
	}
	if len(entries) == 0 {
		return nil, nil, nil
	}
	st := s.state.Load()
	base := &applyBase{
		reader:    reader{txn: s.db.NewTransactionAt(st.applied, false)},
		raw:       map[string]baseNode{},
		dirs:      map[string][]byte{},
		nodeCache: s.nodeCache,
		dirCache:  s.dirCache,
		applied:   st.applied,
	}
	defer base.txn.Discard()
	ov := core.NewOverlay(base)
	g := &groupWrites{nodes: map[string]baseNode{}, leases: map[int64]*core.Lease{}, revIndex: map[int64]uint64{}, lastMeta: -1, lastDir: map[string]int{}}
	results := make([]*core.Result, 0, len(entries))
	last := st.applied
	for i := range entries {
		e := &entries[i]
		if e.Index <= last {
			return nil, nil, fmt.Errorf("store: entry index %d does not follow %d", e.Index, last)
		}
		last = e.Index
		res, b, err := core.Apply(ov, e)
		if err != nil {
			return nil, nil, fmt.Errorf("store: apply entry %d: %w", e.Index, err)
		}
		if err := g.add(b, base); err != nil {
			return nil, nil, err
		}
		results = append(results, res)
	}
	meta, err := ov.Meta()
	if err != nil {
		return nil, nil, fmt.Errorf("store: read meta after group: %w", err)
	}
	writeStart := time.Now()
	if err := s.write(g, st.compactRev, last); err != nil {
		return nil, nil, err
	}
	if s.onCommit != nil {
		s.onCommit(time.Since(writeStart))
	}
	if ready != nil {
		if err := ready(); err != nil {
			return nil, nil, fmt.Errorf("store: entries %d-%d not durable: %w", entries[0].Index, last, err)
		}
	}
	if meta.CompactRev != st.compactRev {
		readFloor, eventFloor := s.floorsFor(meta.CompactRev)
		want, err := discardFor(readFloor, func(rev int64) (uint64, bool, error) {
			if idx, ok := g.revIndex[rev]; ok {
				return idx, true, nil
			}
			return base.revIndex(rev)
		})
		if err != nil {
			return nil, nil, err
		}
		s.hist.advance(readFloor, eventFloor, want)
	}
	// The caches move to the group's state before readers are shown it,
	// and only once nothing can fail any more (see recordCache).
	g.cache(s.nodeCache, s.dirCache, last)
	s.state.Store(&published{applied: last, rev: meta.Rev, compactRev: meta.CompactRev, census: st.census.Plus(g.census)})
	return results, g.batches, nil
}

// add records one entry's batch and its event record. Each node written is
// encoded once, here; the event recorder and the Badger write reuse it.
func (g *groupWrites) add(b *core.Batch, base *applyBase) error {
	// Each batch's encodings are a window of one group-wide slice: fewer
	// allocations than a slice per batch.
	start := len(g.encAll)
	for _, w := range b.Nodes {
		var enc []byte
		if w.Node != nil {
			enc = core.AppendNode(nil, w.Node)
		}
		g.encAll = append(g.encAll, enc)
	}
	encs := g.encAll[start:len(g.encAll):len(g.encAll)]
	var rec []byte
	if b.Changed {
		er := eventRecorder{
			before: func(key []byte) (*core.Node, []byte, error) {
				if w, ok := g.nodes[string(key)]; ok {
					return w.node, w.enc, nil
				}
				n, err := base.Node(key)
				if err != nil || n == nil {
					return nil, nil, err
				}
				return n, base.raw[string(key)].enc, nil
			},
			after: func(key []byte) (*core.Node, []byte) {
				// Written keys are few per entry: a scan beats a map.
				for i := len(b.Nodes) - 1; i >= 0; i-- {
					if bytes.Equal(b.Nodes[i].Key, key) {
						return b.Nodes[i].Node, encs[i]
					}
				}
				return nil, nil
			},
		}
		var err error
		if rec, err = er.record(b); err != nil {
			return err
		}
		g.revIndex[b.Rev] = b.Index
	}
	for i, w := range b.Nodes {
		before, ok := g.nodes[string(w.Key)]
		if !ok {
			n, err := base.Node(w.Key)
			if err != nil {
				return fmt.Errorf("store: read %q before entry %d: %w", w.Key, b.Index, err)
			}
			before.node = n
		}
		g.census.AddNode(before.node, -1)
		g.census.AddNode(w.Node, 1)
		g.nodes[string(w.Key)] = baseNode{enc: encs[i], node: w.Node}
	}
	for _, w := range b.Leases {
		before, ok := g.leases[w.ID]
		if !ok {
			var err error
			if before, err = base.Lease(w.ID); err != nil {
				return fmt.Errorf("store: read lease %d before entry %d: %w", w.ID, b.Index, err)
			}
		}
		g.census.AddLease(before, -1)
		g.census.AddLease(w.Lease, 1)
		g.leases[w.ID] = w.Lease
	}
	start = len(g.encAll)
	for _, w := range b.Dirs {
		var enc []byte
		if w.Dir != nil {
			enc = core.AppendDir(nil, w.Dir)
		}
		g.encAll = append(g.encAll, enc)
		g.lastDir[string(w.Path)] = len(g.batches)
	}
	dirEncs := g.encAll[start:len(g.encAll):len(g.encAll)]
	if b.Meta != nil {
		g.lastMeta = len(g.batches)
	}
	g.batches = append(g.batches, b)
	g.events = append(g.events, rec)
	g.encs = append(g.encs, encs)
	g.dirEncs = append(g.dirEncs, dirEncs)
	return nil
}

// cache moves the caches to applied, the group's last index, updating the
// cached records the group wrote: called once the group's applied index is
// written, before its state is published.
func (g *groupWrites) cache(nodes, dirs *recordCache, applied uint64) {
	nodes.advance(applied, func(set func(key, enc []byte)) {
		for i, b := range g.batches {
			for j, w := range b.Nodes {
				set(w.Key, g.encs[i][j])
			}
		}
	})
	dirs.advance(applied, func(set func(key, enc []byte)) {
		for i, b := range g.batches {
			for j, w := range b.Dirs {
				set(w.Path, g.dirEncs[i][j])
			}
		}
	})
}

// write puts every batch of the group into Badger at its entry's index,
// then trims the event log below any new compact revision.
//
// A tree path's Dir record is written once per group too, by the last batch
// that changed it: ZooKeeper creates in one parent rewrite the parent's Dir
// once each, and only the last of them is read again. Dir records are
// ZooKeeper's, which reads only the latest state; at a timestamp inside a
// group (a View of an older revision) a Dir record can lag, while nodes and
// the child index are exact at every revision.
//
// core.Meta is written once per group, by the last batch that changed it,
// rather than by every entry: at the applied index, where the latest state
// and the next group read it, it is exact. A View at an older revision reads
// at a timestamp that may fall inside a group, where the record can lag;
// View.Meta takes the revision from the View itself, and the compact
// revision, the only other field, is still written by every entry that
// changes it.
//
// The applied index goes last, as a Badger write of its own that starts
// only once every record of the group (and any trimming) is written.
// Badger does not keep a write batch's records in order: records written
// at their own versions get no transaction markers, a batch's records go
// to the log in map order, and a big batch is split into several
// transactions. What it does keep is the order of separate writes, since
// one goroutine copies them into the memtable log one after the other,
// and a reopened Badger replays that log only up to its first damaged
// record. So a crash of the process that keeps the applied index kept
// every record of every group up to it; see durable.go for a crash of the
// machine.
func (s *Store) write(g *groupWrites, compactRev int64, applied uint64) error {
	compacts := false
	wb := s.db.NewManagedWriteBatch()
	for i, b := range g.batches {
		writeMeta := b.Meta != nil && (i == g.lastMeta || b.Compact != 0)
		lastDir := func(path []byte) bool { return g.lastDir[string(path)] == i }
		if err := writeBatch(wb, b, g.encs[i], g.dirEncs[i], lastDir, g.events[i], writeMeta); err != nil {
			wb.Cancel()
			return fmt.Errorf("store: write entry %d: %w", b.Index, err)
		}
		compacts = compacts || b.Compact != 0
	}
	// Flush returns once every transaction the batch was split into is in
	// the memtable log.
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store: write group: %w", err)
	}
	if compacts {
		from := max(compactRev, s.restoredRev, 1)
		for _, b := range g.batches {
			if b.Compact == 0 {
				continue
			}
			if err := s.trimHistory(from, b.Compact, b.Index); err != nil {
				return err
			}
			from = max(from, b.Compact)
		}
	}
	if s.crashBeforeApplied {
		return fmt.Errorf("store: stopped before recording applied index %d (test crash)", applied)
	}
	return s.writeApplied(applied)
}

// writeBatch writes one entry's records at its index. encs and dirEncs hold
// the encodings of b.Nodes and b.Dirs; lastDir says whether this batch is
// the group's last to write a Dir (see Store.write). The revision's event record also serves as
// the revision index (see reader.revIndex).
func writeBatch(wb *badger.WriteBatch, b *core.Batch, encs, dirEncs [][]byte, lastDir func(path []byte) bool, events []byte, writeMeta bool) error {
	ts := b.Index
	set := func(key, value []byte) error {
		if value == nil {
			value = []byte{}
		}
		return wb.SetEntryAt(badger.NewEntry(key, value), ts)
	}
	del := func(key []byte) error { return wb.DeleteAt(key, ts) }
	for i, w := range b.Nodes {
		var err error
		if w.Node != nil {
			err = set(nodeKey(w.Key), encs[i])
		} else {
			err = del(nodeKey(w.Key))
		}
		if err != nil {
			return err
		}
	}
	for i, w := range b.Dirs {
		if !lastDir(w.Path) {
			continue
		}
		var err error
		if w.Dir != nil {
			err = set(dirKey(w.Path), dirEncs[i])
		} else {
			err = del(dirKey(w.Path))
		}
		if err != nil {
			return err
		}
	}
	for _, w := range b.Children {
		var err error
		if w.Present {
			err = set(childKey(w.Parent, w.Name), nil)
		} else {
			err = del(childKey(w.Parent, w.Name))
		}
		if err != nil {
			return err
		}
	}
	for _, w := range b.Leases {
		var err error
		if w.Lease != nil {
			err = set(leaseKey(w.ID), core.AppendLease(nil, w.Lease))
		} else {
			err = del(leaseKey(w.ID))
		}
		if err != nil {
			return err
		}
	}
	for _, w := range b.LeaseKeys {
		var err error
		if w.Present {
			err = set(leaseAttachKey(w.ID, w.Key), nil)
		} else {
			err = del(leaseAttachKey(w.ID, w.Key))
		}
		if err != nil {
			return err
		}
	}
	if writeMeta {
		if err := set(metaKey(metaCore), core.AppendMeta(nil, *b.Meta)); err != nil {
			return err
		}
	}
	if b.Changed {
		if err := set(eventKey(b.Rev), events); err != nil {
			return err
		}
	}
	return nil
}

// trimHistory deletes, at timestamp ts, the event log records (which are the
// revision index too) of revisions [from, to), a bounded chunk per write.
// The only separate revision index record a store has is the restored
// revision's, written by RestoreSnapshot.
func (s *Store) trimHistory(from, to int64, ts uint64) error {
	for lo := from; lo < to; lo += compactChunk {
		hi := min(lo+compactChunk, to)
		wb := s.db.NewManagedWriteBatch()
		for rev := lo; rev < hi; rev++ {
			err := wb.DeleteAt(eventKey(rev), ts)
			if err == nil && rev == s.restoredRev {
				err = wb.DeleteAt(revIndexKey(rev), ts)
			}
			if err != nil {
				wb.Cancel()
				return fmt.Errorf("store: trim history at revision %d: %w", rev, err)
			}
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("store: trim history [%d, %d): %w", lo, hi, err)
		}
	}
	return nil
}

// writeApplied records the applied index, alone, after everything it covers
// is written (see Store.write).
func (s *Store) writeApplied(index uint64) error {
	ts := max(index, s.appliedTs)
	wb := s.db.NewManagedWriteBatch()
	if err := wb.SetEntryAt(badger.NewEntry(metaKey(metaApplied), encodeUint64(index)), ts); err != nil {
		wb.Cancel()
		return fmt.Errorf("store: record applied index %d: %w", index, err)
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store: record applied index %d: %w", index, err)
	}
	s.appliedTs = ts
	return nil
}
