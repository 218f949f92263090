package store

import "encoding/binary"

// Record prefixes. Each record kind owns one leading byte so that every kind
// is one contiguous, ordered stretch of Badger's keyspace.
const (
	prefixNode      = 'n' // n + key -> core.AppendNode
	prefixDir       = 'd' // d + path -> core.AppendDir
	prefixChild     = 'c' // c + parent + 0x00 + name -> empty
	prefixLease     = 'l' // l + id(8, big-endian) -> core.AppendLease
	prefixLeaseKey  = 'k' // k + id(8) + key -> empty
	prefixMeta      = 'm' // m + name -> see the meta* names
	prefixRevIndex  = 'r' // r + rev(8) -> index(8) of the entry that created rev (restored revision only)
	prefixEventLog  = 'e' // e + rev(8) -> the revision's events, keys-only (see events.go)
	childSeparator  = 0x00
	uint64KeyLength = 8
)

// Meta record names.
const (
	// metaCore holds core.Meta: it is replicated state, written with the
	// last batch of a group that changed it (and with every compaction).
	metaCore = "core"
	// metaApplied holds the applied index: written last, after every batch
	// of a group, so that it never runs ahead of the state it describes.
	metaApplied = "applied"
	// metaRestored holds the revision a snapshot was restored at: history
	// below it is not in this store.
	metaRestored = "restored"
)

func nodeKey(key []byte) []byte { return prefixed(prefixNode, key) }
func dirKey(path []byte) []byte { return prefixed(prefixDir, path) }
func metaKey(name string) []byte {
	return prefixed(prefixMeta, []byte(name))
}

func prefixed(p byte, rest []byte) []byte {
	k := make([]byte, 0, 1+len(rest))
	k = append(k, p)
	return append(k, rest...)
}

// childPrefix is the prefix of every child-index record of parent. Tree paths
// never contain 0x00, so the prefix names exactly parent's direct children.
func childPrefix(parent []byte) []byte {
	k := make([]byte, 0, len(parent)+2)
	k = append(k, prefixChild)
	k = append(k, parent...)
	return append(k, childSeparator)
}

func childKey(parent, name []byte) []byte {
	return append(childPrefix(parent), name...)
}

func leaseKey(id int64) []byte { return uint64Key(prefixLease, uint64(id)) }

func leaseKeyPrefix(id int64) []byte { return uint64Key(prefixLeaseKey, uint64(id)) }

func leaseAttachKey(id int64, key []byte) []byte {
	return append(leaseKeyPrefix(id), key...)
}

func revIndexKey(rev int64) []byte { return uint64Key(prefixRevIndex, uint64(rev)) }

func eventKey(rev int64) []byte { return uint64Key(prefixEventLog, uint64(rev)) }

func uint64Key(p byte, v uint64) []byte {
	k := make([]byte, 1+uint64KeyLength)
	k[0] = p
	binary.BigEndian.PutUint64(k[1:], v)
	return k
}

func encodeUint64(v uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v)
}

// prefixEnd returns the smallest key above every key with the prefix, or nil
// when there is none.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func getUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
