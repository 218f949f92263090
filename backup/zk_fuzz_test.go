package backup

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// juteTxn builds a logged transaction: TxnHeader, then record bytes.
func juteTxn(zxid int64, typ int32, record []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, 0x1234) // client id
	b = binary.BigEndian.AppendUint32(b, 1)         // cxid
	b = binary.BigEndian.AppendUint64(b, uint64(zxid))
	b = binary.BigEndian.AppendUint64(b, 1700000000000) // time
	b = binary.BigEndian.AppendUint32(b, uint32(typ))
	return append(b, record...)
}

func juteString(s string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
}

// FuzzZKTxn: whatever a transaction log entry holds, applying it returns
// an error or changes the tree; it never panics.
func FuzzZKTxn(f *testing.F) {
	create := append(juteString("/a"), juteString("data")...)
	create = append(create, 0, 0, 0, 0) // no ACL entries
	create = append(create, 0)          // not ephemeral
	create = append(create, 0xff, 0xff, 0xff, 0xff)
	f.Add(juteTxn(1, zkOpCreate, create))
	f.Add(juteTxn(2, zkOpDelete, juteString("/a")))
	f.Add(juteTxn(3, zkOpMulti, []byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 6, 0, 0, 0, 2, '/', 'a'}))
	f.Add(juteTxn(4, zkOpCloseSession, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		tree := &zkTree{nodes: map[string]*zkNode{"/": {}}, sessions: map[int64]int32{}}
		_ = tree.applyTxn(b)
		if tree.nodes["/"] == nil {
			t.Fatal("the root went away")
		}
		if _, err := tree.state(); err != nil {
			return // a path Janus does not accept is refused, not stored
		}
	})
}

// FuzzZKSnapshot: a damaged snapshot file is refused with an error.
func FuzzZKSnapshot(f *testing.F) {
	f.Add([]byte{0x5a, 0x4b, 0x53, 0x4e, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x5a, 0x4b, 0x53, 0x4e, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0x75, 0x30})
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "snapshot.0")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		tree, err := readZKSnapshot(path)
		if err == nil && tree.nodes["/"] == nil {
			t.Fatal("a snapshot without a root was accepted")
		}
	})
}
