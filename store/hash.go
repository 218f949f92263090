package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// StateHash digests the replicated state the View shows: every record a
// snapshot carries (nodes with their ZooKeeper metadata and ACLs, Dir
// records, the child index, leases and their keys, core.Meta with the
// alarms), by key and value. History and the store's own bookkeeping
// (event log, revision index, applied index) are left out, and so are
// Badger's versions, which differ between members for records written
// once per group (Meta, Dir). Members that applied the same log have
// equal hashes at the same applied index, provided the View is exact
// there: a latest View always is, a View of an older revision is not
// (its Meta and Dir records can lag inside a group).
// It reads the whole state, so it checks ctx as it goes.
func (v *View) StateHash(ctx context.Context) (uint64, error) {
	h := sha256.New()
	var num [binary.MaxVarintLen64]byte
	field := func(b []byte) {
		h.Write(num[:binary.PutUvarint(num[:], uint64(len(b)))])
		h.Write(b)
	}
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	it := v.txn.NewIterator(opts)
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		item := it.Item()
		key := item.Key()
		if !inSnapshot(key) {
			continue
		}
		err := item.Value(func(val []byte) error {
			field(key)
			field(val)
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("store: hash record %q: %w", key, err)
		}
	}
	return binary.BigEndian.Uint64(h.Sum(nil)), nil
}
