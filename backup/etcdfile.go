package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"

	"github.com/januskv/janus/core"
)

// The parts of etcd v3.7's backend schema (server/storage/schema and
// storage/mvcc/revision.go) a backup file needs.
var (
	bucketKey   = []byte("key")
	bucketMeta  = []byte("meta")
	bucketLease = []byte("lease")
	// The buckets a fresh etcd backend has besides those three; etcd
	// creates missing ones itself, they are written empty so the file
	// looks like one etcd saved.
	bucketsEmpty = [][]byte{[]byte("alarm"), []byte("cluster"), []byte("members"),
		[]byte("members_removed")}

	// The auth store (schema/auth.go, auth_users.go, auth_roles.go): the
	// auth bucket holds whether auth is on and its revision; users and
	// roles are authpb records keyed by name.
	bucketAuth      = []byte("auth")
	bucketAuthUsers = []byte("authUsers")
	bucketAuthRoles = []byte("authRoles")
	authEnabledKey  = []byte("authEnabled")
	authRevisionKey = []byte("authRevision")

	metaConsistentIndex  = []byte("consistent_index")
	metaTerm             = []byte("term")
	metaScheduledCompact = []byte("scheduledCompactRev")
	metaFinishedCompact  = []byte("finishedCompactRev")
	metaStorageVersion   = []byte("storageVersion")

	// bucketJanus holds Janus's own snapshot of the same state, in
	// janusChunk pieces keyed by their 8-byte big-endian sequence number.
	// etcd never reads a bucket it does not know (its hashes cover the key
	// bucket, defrag copies every bucket), so the file stays an etcd file.
	bucketJanus = []byte("janus")
	// janusState, in the janus bucket, is the etcd state the snapshot
	// there matches (see etcdFingerprint): a file that etcd served and
	// changed after Janus wrote it no longer matches, and its key and
	// lease buckets are restored instead.
	janusState = []byte("state")
)

// StorageVersion is the etcd storage version of the files Janus writes,
// the Version field of etcd's SnapshotResponse.
const StorageVersion = "3.7.0"

const (
	// revBytesLen is an etcd revision key: 8-byte main, '_', 8-byte sub.
	revBytesLen = 8 + 1 + 8
	// A tombstone (a deletion) is a revision key with a trailing 't'.
	markTombstone = 't'

	janusChunk = 1 << 20
	// txnBytes bounds what one bbolt transaction writes: bbolt keeps a
	// transaction's dirty pages in memory until it commits.
	txnBytes = 64 << 20
)

func revBytes(main, sub int64) []byte {
	b := make([]byte, revBytesLen)
	binary.BigEndian.PutUint64(b, uint64(main))
	b[8] = '_'
	binary.BigEndian.PutUint64(b[9:], uint64(sub))
	return b
}

// Source is a consistent read of a member's state: the core.View the etcd
// buckets are written from, and Janus's own snapshot of the same state.
// store.View is one.
type Source interface {
	core.View
	WriteSnapshot(w io.Writer) (uint64, error)
}

// WriteEtcdFile writes the state src shows to w as an etcd v3.7 backend
// file and returns the applied index it is a copy of. bbolt needs a real
// file, so the database is built in a temporary file in tmpDir first.
//
// The key bucket holds each key's latest version at its mod revision
// (keys sharing one get sub revisions in key order), the lease bucket
// every lease and ZooKeeper session, and meta marks the current revision
// compacted: history is not carried, so etcd refuses reads below it as
// Janus does after a restore, and starts counting from it.
func WriteEtcdFile(w io.Writer, src Source, tmpDir string) (uint64, error) {
	f, err := os.CreateTemp(tmpDir, "etcd-snapshot-*.db")
	if err != nil {
		return 0, fmt.Errorf("backup: temporary file: %w", err)
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)

	applied, err := buildEtcdFile(path, src)
	if err != nil {
		return 0, err
	}
	f, err = os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("backup: reopen %s: %w", path, err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return 0, fmt.Errorf("backup: send etcd file: %w", err)
	}
	return applied, nil
}

func buildEtcdFile(path string, src Source) (uint64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		return 0, fmt.Errorf("backup: open %s: %w", path, err)
	}
	// The file is a temporary one: if the process dies it is garbage.
	db.NoSync = true
	bw := &boltWriter{db: db}
	applied, err := writeEtcdState(bw, src)
	if err == nil {
		err = bw.commit()
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("backup: close %s: %w", path, cerr)
	}
	bw.rollback()
	return applied, err
}

func writeEtcdState(bw *boltWriter, src Source) (uint64, error) {
	meta, err := src.Meta()
	if err != nil {
		return 0, fmt.Errorf("backup: read meta: %w", err)
	}
	for _, name := range append([][]byte{bucketKey, bucketMeta, bucketLease, bucketJanus,
		bucketAuth, bucketAuthUsers, bucketAuthRoles}, bucketsEmpty...) {
		if err := bw.createBucket(name); err != nil {
			return 0, err
		}
	}
	// Keys: one revision key per node, subs counted per mod revision.
	subs := map[int64]int64{}
	var putErr error
	err = src.Range(nil, nil, func(n *core.Node) bool {
		sub := subs[n.ModRev]
		subs[n.ModRev] = sub + 1
		kv, err := proto.Marshal(&mvccpb.KeyValue{
			Key: n.Key, Value: n.Value, CreateRevision: n.CreateRev,
			ModRevision: n.ModRev, Version: n.Version, Lease: n.Lease,
		})
		if err == nil {
			err = bw.put(bucketKey, revBytes(n.ModRev, sub), kv)
		}
		putErr = err
		return err == nil
	})
	if err == nil {
		err = putErr
	}
	if err != nil {
		return 0, fmt.Errorf("backup: write keys: %w", err)
	}
	err = src.Leases(func(l *core.Lease) bool {
		b, err := proto.Marshal(&leasepb.Lease{ID: l.ID, TTL: l.TTL})
		if err == nil {
			err = bw.put(bucketLease, binary.BigEndian.AppendUint64(nil, uint64(l.ID)), b)
		}
		putErr = err
		return err == nil
	})
	if err == nil {
		err = putErr
	}
	if err != nil {
		return 0, fmt.Errorf("backup: write leases: %w", err)
	}
	if err := writeEtcdAuth(bw, meta.AuthState()); err != nil {
		return 0, err
	}
	// The fingerprint reads the lease and auth buckets back: they must be
	// in this transaction.
	if err := bw.commit(); err != nil {
		return 0, err
	}
	if err := bw.begin(); err != nil {
		return 0, err
	}
	fp, err := etcdFingerprint(bw.tx, meta.Rev)
	if err != nil {
		return 0, err
	}
	cw := &chunkWriter{bw: bw}
	applied, err := src.WriteSnapshot(cw)
	if err == nil {
		err = cw.flush()
	}
	if err != nil {
		return 0, fmt.Errorf("backup: write janus snapshot: %w", err)
	}
	for _, kv := range [][2][]byte{
		// etcdutl replaces the index and term with its new raft log's.
		{metaConsistentIndex, binary.BigEndian.AppendUint64(nil, applied)},
		{metaTerm, binary.BigEndian.AppendUint64(nil, 1)},
		{metaScheduledCompact, revBytes(meta.Rev, 0)},
		{metaFinishedCompact, revBytes(meta.Rev, 0)},
		{metaStorageVersion, []byte(StorageVersion)},
	} {
		if err := bw.put(bucketMeta, kv[0], kv[1]); err != nil {
			return 0, fmt.Errorf("backup: write meta: %w", err)
		}
	}
	if err := bw.put(bucketJanus, janusState, fp); err != nil {
		return 0, err
	}
	return applied, nil
}

// writeEtcdAuth writes the auth store as etcd keeps it. Passwords are
// bcrypt hashes in both, so users log in to the etcd restored from the
// file with the passwords they had; the simple-token key is Janus's own
// and stays out (etcd signs its tokens otherwise).
func writeEtcdAuth(bw *boltWriter, st *core.AuthState) error {
	enabled := []byte{0}
	if st.Enabled {
		enabled = []byte{1}
	}
	if err := bw.put(bucketAuth, authEnabledKey, enabled); err != nil {
		return err
	}
	if err := bw.put(bucketAuth, authRevisionKey, binary.BigEndian.AppendUint64(nil, st.Rev)); err != nil {
		return err
	}
	for _, u := range st.Users {
		rec := &authpb.User{Name: []byte(u.Name), Password: u.Password, Roles: u.Roles}
		if u.NoPassword {
			rec.Options = &authpb.UserAddOptions{NoPassword: true}
		}
		b, err := proto.Marshal(rec)
		if err == nil {
			err = bw.put(bucketAuthUsers, rec.Name, b)
		}
		if err != nil {
			return fmt.Errorf("backup: write user %q: %w", u.Name, err)
		}
	}
	for _, r := range st.Roles {
		rec := &authpb.Role{Name: []byte(r.Name)}
		for _, p := range r.Perms {
			rec.KeyPermission = append(rec.KeyPermission, &authpb.Permission{
				PermType: authpb.Permission_Type(p.Type), Key: p.Key, RangeEnd: p.End})
		}
		b, err := proto.Marshal(rec)
		if err == nil {
			err = bw.put(bucketAuthRoles, rec.Name, b)
		}
		if err != nil {
			return fmt.Errorf("backup: write role %q: %w", r.Name, err)
		}
	}
	return nil
}

// readEtcdAuth reads an etcd backend file's auth store; nil when it holds
// none. etcd keeps no key for Janus's simple tokens: the first
// Authenticate after the restore draws one (see etcdapi).
func readEtcdAuth(tx *bolt.Tx) (*core.AuthState, error) {
	ab := tx.Bucket(bucketAuth)
	if ab == nil {
		return nil, nil
	}
	st := &core.AuthState{Rev: 1}
	if v := ab.Get(authRevisionKey); len(v) == 8 {
		st.Rev = binary.BigEndian.Uint64(v)
	}
	st.Enabled = bytes.Equal(ab.Get(authEnabledKey), []byte{1})
	if b := tx.Bucket(bucketAuthUsers); b != nil {
		err := b.ForEach(func(k, v []byte) error {
			rec := &authpb.User{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("backup: user %q: %w", k, err)
			}
			roles := slices.Clone(rec.Roles)
			slices.Sort(roles)
			st.Users = append(st.Users, core.AuthUser{Name: string(rec.Name), Password: rec.Password,
				NoPassword: rec.Options.GetNoPassword(), Roles: roles})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if b := tx.Bucket(bucketAuthRoles); b != nil {
		err := b.ForEach(func(k, v []byte) error {
			rec := &authpb.Role{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("backup: role %q: %w", k, err)
			}
			r := core.AuthRole{Name: string(rec.Name)}
			for _, p := range rec.KeyPermission {
				if p.PermType < authpb.Permission_READ || p.PermType > authpb.Permission_READWRITE {
					return fmt.Errorf("backup: role %q: permission type %d", k, p.PermType)
				}
				r.Perms = append(r.Perms, core.AuthPerm{Type: core.AuthPermType(p.PermType), Key: p.Key, End: p.RangeEnd})
			}
			st.Roles = append(st.Roles, r)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if !st.Enabled && st.Rev == 1 && len(st.Users) == 0 && len(st.Roles) == 0 {
		return nil, nil
	}
	return st, nil
}

// boltWriter writes through a chain of bbolt transactions, committing one
// whenever it has written txnBytes.
type boltWriter struct {
	db      *bolt.DB
	tx      *bolt.Tx
	written int
}

func (bw *boltWriter) begin() error {
	if bw.tx != nil {
		return nil
	}
	tx, err := bw.db.Begin(true)
	if err != nil {
		return fmt.Errorf("backup: begin bbolt transaction: %w", err)
	}
	bw.tx, bw.written = tx, 0
	return nil
}

func (bw *boltWriter) createBucket(name []byte) error {
	if err := bw.begin(); err != nil {
		return err
	}
	if _, err := bw.tx.CreateBucketIfNotExists(name); err != nil {
		return fmt.Errorf("backup: create bucket %s: %w", name, err)
	}
	return nil
}

func (bw *boltWriter) put(bucket, key, value []byte) error {
	if err := bw.begin(); err != nil {
		return err
	}
	b := bw.tx.Bucket(bucket)
	if b == nil {
		return fmt.Errorf("backup: no bucket %s", bucket)
	}
	// Keys mostly arrive out of order; bbolt's default fill suits that.
	if err := b.Put(key, value); err != nil {
		return fmt.Errorf("backup: put into %s: %w", bucket, err)
	}
	bw.written += len(key) + len(value)
	if bw.written >= txnBytes {
		return bw.commit()
	}
	return nil
}

func (bw *boltWriter) commit() error {
	if bw.tx == nil {
		return nil
	}
	tx := bw.tx
	bw.tx = nil
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("backup: commit bbolt transaction: %w", err)
	}
	return nil
}

func (bw *boltWriter) rollback() {
	if bw.tx != nil {
		bw.tx.Rollback()
		bw.tx = nil
	}
}

// chunkWriter cuts what is written to it into janusChunk values of the
// janus bucket.
type chunkWriter struct {
	bw  *boltWriter
	buf []byte
	seq uint64
}

func (cw *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		take := min(len(p), janusChunk-len(cw.buf))
		cw.buf = append(cw.buf, p[:take]...)
		p = p[take:]
		if len(cw.buf) == janusChunk {
			if err := cw.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (cw *chunkWriter) flush() error {
	if len(cw.buf) == 0 {
		return nil
	}
	err := cw.bw.put(bucketJanus, binary.BigEndian.AppendUint64(nil, cw.seq), cw.buf)
	cw.seq++
	// bbolt keeps the slice until the transaction commits.
	cw.buf = nil
	return err
}

// chunkReader reads the janus bucket's chunks back in order.
type chunkReader struct {
	c    *bolt.Cursor
	next uint64
	cur  []byte
	k, v []byte
}

func newChunkReader(b *bolt.Bucket) *chunkReader {
	cr := &chunkReader{c: b.Cursor()}
	cr.k, cr.v = cr.c.First()
	return cr
}

var errChunkGap = errors.New("backup: the janus bucket's chunks are not consecutive")

func (cr *chunkReader) Read(p []byte) (int, error) {
	for len(cr.cur) == 0 {
		if cr.k == nil || len(cr.k) != 8 { // the chunks end where janusState begins
			return 0, io.EOF
		}
		if len(cr.k) != 8 || binary.BigEndian.Uint64(cr.k) != cr.next {
			return 0, errChunkGap
		}
		cr.cur = cr.v
		cr.next++
		cr.k, cr.v = cr.c.Next()
	}
	n := copy(p, cr.cur)
	cr.cur = cr.cur[n:]
	return n, nil
}

// etcdFingerprint identifies the etcd state of a backend file: its
// current revision, the IDs of its leases and its auth records. Every
// change etcd makes to keys moves the revision; granting or revoking a
// lease without keys does not, hence the IDs, nor does changing users or
// roles, hence the records. A file with no auth records hashes as files
// written before Janus wrote them did.
func etcdFingerprint(tx *bolt.Tx, rev int64) ([]byte, error) {
	h := sha256.New()
	if lb := tx.Bucket(bucketLease); lb != nil {
		if err := lb.ForEach(func(k, _ []byte) error { h.Write(k); return nil }); err != nil {
			return nil, fmt.Errorf("backup: read leases: %w", err)
		}
	}
	for _, name := range [][]byte{bucketAuth, bucketAuthUsers, bucketAuthRoles} {
		b := tx.Bucket(name)
		if b == nil {
			continue
		}
		err := b.ForEach(func(k, v []byte) error {
			for _, p := range [][]byte{name, k, v} {
				h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(p))))
				h.Write(p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("backup: read %s: %w", name, err)
		}
	}
	return h.Sum(binary.BigEndian.AppendUint64(nil, uint64(rev))), nil
}

// etcdRev is the current revision of an etcd backend file: the highest of
// its newest revision key and its compaction marks (compaction can remove
// the newest keys' tombstones).
func etcdRev(tx *bolt.Tx) int64 {
	var rev int64
	if mb := tx.Bucket(bucketMeta); mb != nil {
		for _, name := range [][]byte{metaScheduledCompact, metaFinishedCompact} {
			if v := mb.Get(name); len(v) >= 8 {
				rev = max(rev, int64(binary.BigEndian.Uint64(v)))
			}
		}
	}
	if kb := tx.Bucket(bucketKey); kb != nil {
		if k, _ := kb.Cursor().Last(); len(k) >= 8 {
			rev = max(rev, int64(binary.BigEndian.Uint64(k)))
		}
	}
	return rev
}
