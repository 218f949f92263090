package store

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

// View is a consistent read of the store at one revision: a core.View over a
// Badger transaction at a fixed timestamp. It may be used from several
// goroutines at once. Close it when done: an open View holds back Badger's
// reclamation of old versions.
type View struct {
	reader
	rev int64
	// hist and pin are the discard timestamp the View holds (see
	// history.pin), released by the first Close; closed says it was.
	hist   *history
	pin    uint64
	closed atomic.Bool
	// at is the applied index the View reads Badger at. The store's record
	// caches describe the state at that index or have moved past it, and
	// answer for the keys that did not change since (see recordCache).
	at          uint64
	nodes, dirs *recordCache
}

var _ core.View = (*View)(nil)

// Rev returns the revision the View shows.
func (v *View) Rev() int64 { return v.rev }

// Meta returns the bookkeeping at the View's revision. The stored record is
// written once per applied group (see Store.write), so at a timestamp inside
// a group its revision can lag; the View's own revision is exact, and the
// compact revision is written by every entry that changes it.
func (v *View) Meta() (core.Meta, error) {
	m, err := v.reader.Meta()
	m.Rev = v.rev
	return m, err
}

// Node answers from the store's cache when it can: a ZooKeeper read of a
// hot node then asks Badger for nothing, and decodes nothing either. The
// cache keeps the node the first reader decoded; every reader gets a copy
// of it that shares its Key, Value and ACL, which nobody modifies (core
// clones a node before changing it).
func (v *View) Node(key []byte) (*core.Node, error) {
	if v.nodes == nil {
		return v.reader.Node(key)
	}
	e, ok := v.nodes.entry(key, v.at)
	if !ok {
		enc, err := v.get(nodeKey(key))
		if err != nil {
			return nil, fmt.Errorf("store: read node %q: %w", key, err)
		}
		if enc != nil {
			v.nodes.add(key, enc, v.at)
		}
		e = cacheEntry{enc: enc}
	}
	if e.enc == nil {
		return nil, nil
	}
	n := e.node
	if n == nil {
		var err error
		if n, err = core.DecodeNodeShared(bytes.Clone(key), e.enc); err != nil {
			return nil, err
		}
		v.nodes.keepDecoded(key, e.enc, n)
	}
	c := *n
	return &c, nil
}

// Dir answers from the store's cache when it can. A missing Dir is
// admitted only for a stored node (a leaf), as Apply admits it (see
// recordCache): TreeNode reads the node first, so a leaf's node is cached
// by the time its Dir is read.
func (v *View) Dir(path []byte) (*core.Dir, error) {
	if v.dirs == nil {
		return v.reader.Dir(path)
	}
	enc, ok := v.dirs.get(path, v.at)
	if !ok {
		var err error
		if enc, err = v.get(dirKey(path)); err != nil {
			return nil, err
		}
		if enc != nil {
			v.dirs.add(path, enc, v.at)
		} else if n, ok := v.nodes.get(path, v.at); ok && n != nil {
			v.dirs.add(path, nil, v.at)
		}
	}
	if enc == nil {
		return nil, nil
	}
	return core.DecodeDir(enc)
}

// Close discards the View's transaction. It is safe to call more than once.
func (v *View) Close() {
	// Not a sync.Once: every View closes once, which is its slow path,
	// a mutex, on every read.
	if v.closed.Swap(true) {
		return
	}
	v.txn.Discard()
	if v.hist != nil {
		v.hist.unpin(v.pin)
	}
}

// reader answers core.View reads from one Badger transaction.
type reader struct {
	txn *badger.Txn
	// afterLookup, if set, runs between looking a key up and reading its
	// value. Only tests set it.
	afterLookup func()
}

// valueRereads bounds how often value looks a key up again.
const valueRereads = 8

// value calls fn with the value at key and says whether there is one.
//
// Badger reads a value kept in the value log only when asked (item.Value),
// and when value log GC deleted the file in between, it logs the failure
// and hands over an empty value (iterator.go, yieldItemValue): open
// iterators put GC's deletions off, single lookups do not. GC wrote the
// value again, at its version, before it deleted the file, so looking the
// key up again finds it: an empty value where the record points into the
// value log is looked up again.
func (r reader) value(key []byte, fn func(v []byte) error) (bool, error) {
	for range valueRereads {
		item, err := r.txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("store: read %q: %w", key, err)
		}
		if r.afterLookup != nil {
			r.afterLookup()
		}
		lost := false
		err = item.Value(func(v []byte) error {
			if len(v) == 0 && item.ValueSize() > 0 {
				lost = true
				return nil
			}
			return fn(v)
		})
		if err != nil {
			return true, err
		}
		if !lost {
			return true, nil
		}
	}
	return true, fmt.Errorf("store: read %q: its value is missing from the value log %d times", key, valueRereads)
}

// get returns a copy of the value at key, or nil when there is none.
func (r reader) get(key []byte) ([]byte, error) {
	var out []byte
	_, err := r.value(key, func(v []byte) error {
		out = bytes.Clone(v) // nil for an empty value, as before
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read value of %q: %w", key, err)
	}
	return out, nil
}

func (r reader) Meta() (core.Meta, error) {
	b, err := r.get(metaKey(metaCore))
	if err != nil || b == nil {
		// A brand-new store is at revision 1, like core.NewMemState.
		return core.Meta{Rev: 1}, err
	}
	return core.DecodeMeta(b)
}

// Node decodes the record in place: DecodeNode copies what it keeps, so
// a copy of the whole record first (as get makes) would copy the value
// twice, which for a 1 MiB value cost more CPU than the rest of the read.
func (r reader) Node(key []byte) (*core.Node, error) {
	var n *core.Node
	_, err := r.value(nodeKey(key), func(v []byte) (err error) {
		n, err = core.DecodeNode(bytes.Clone(key), v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read node %q: %w", key, err)
	}
	return n, nil
}

func (r reader) Dir(path []byte) (*core.Dir, error) {
	b, err := r.get(dirKey(path))
	if err != nil || b == nil {
		return nil, err
	}
	return core.DecodeDir(b)
}

func (r reader) Lease(id int64) (*core.Lease, error) {
	b, err := r.get(leaseKey(id))
	if err != nil || b == nil {
		return nil, err
	}
	return core.DecodeLease(b)
}

// scan visits, in key order, the records in [start, end) that share prefix,
// calling fn with the key (without the prefix, valid only during the call)
// and the item until fn returns false. A nil end means the prefix's end.
func (r reader) scan(prefix, start, end []byte, fn func(rest []byte, item *badger.Item) (bool, error)) error {
	opts := badger.DefaultIteratorOptions
	// Values are small and live in the LSM tree; fetching each one as it is
	// visited beats a prefetch pipeline that a stopped scan would waste.
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := r.txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if end != nil && bytes.Compare(k, end) >= 0 {
			return nil
		}
		more, err := fn(k[len(prefix):], item)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) Range(start, end []byte, fn func(*core.Node) bool) error {
	prefix := []byte{prefixNode}
	var stop []byte
	if end != nil {
		stop = nodeKey(end)
	}
	return r.scan(prefix, nodeKey(start), stop, func(key []byte, item *badger.Item) (bool, error) {
		var n *core.Node
		err := item.Value(func(v []byte) error {
			var err error
			n, err = core.DecodeNode(bytes.Clone(key), v)
			return err
		})
		if err != nil {
			return false, fmt.Errorf("store: range at %q: %w", key, err)
		}
		return fn(n), nil
	})
}

func (r reader) Children(parent []byte, fn func(name []byte) bool) error {
	prefix := childPrefix(parent)
	return r.scan(prefix, prefix, nil, func(name []byte, _ *badger.Item) (bool, error) {
		return fn(bytes.Clone(name)), nil
	})
}

func (r reader) HasChild(parent, name []byte) (bool, error) {
	return r.value(childKey(parent, name), func([]byte) error { return nil })
}

func (r reader) Leases(fn func(*core.Lease) bool) error {
	prefix := []byte{prefixLease}
	return r.scan(prefix, prefix, nil, func(_ []byte, item *badger.Item) (bool, error) {
		var le *core.Lease
		err := item.Value(func(v []byte) error {
			var err error
			le, err = core.DecodeLease(v)
			return err
		})
		if err != nil {
			return false, fmt.Errorf("store: read leases: %w", err)
		}
		return fn(le), nil
	})
}

func (r reader) LeaseKeys(id int64, fn func(key []byte) bool) error {
	prefix := leaseKeyPrefix(id)
	return r.scan(prefix, prefix, nil, func(key []byte, _ *badger.Item) (bool, error) {
		return fn(bytes.Clone(key)), nil
	})
}

// Dirs calls fn with every tree path that has a Dir record, in byte order,
// until fn returns false. core.View has no such listing; state digests
// (core.HashView) and consistency checks need one.
func (r reader) Dirs(fn func(path []byte) bool) error {
	prefix := []byte{prefixDir}
	return r.scan(prefix, prefix, nil, func(path []byte, _ *badger.Item) (bool, error) {
		return fn(bytes.Clone(path)), nil
	})
}

// revIndex returns the index of the entry that created rev. The revision's
// event record starts with that index; a revision without one is the
// revision a snapshot was restored at, whose index RestoreSnapshot records
// apart.
func (r reader) revIndex(rev int64) (uint64, bool, error) {
	b, err := r.get(eventKey(rev))
	if err != nil {
		return 0, false, err
	}
	if b != nil {
		idx, err := eventIndex(b)
		if err != nil {
			return 0, false, fmt.Errorf("store: event record of revision %d: %w", rev, err)
		}
		return idx, true, nil
	}
	b, err = r.get(revIndexKey(rev))
	if err != nil || b == nil {
		return 0, false, err
	}
	if len(b) != 8 {
		return 0, false, fmt.Errorf("store: revision index record of %d is %d bytes", rev, len(b))
	}
	return getUint64(b), true, nil
}
