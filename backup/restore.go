package backup

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/store"
)

// RestoreConfig says where a restore goes and how strict it is.
type RestoreConfig struct {
	// DataDir is the new member's data directory. It must not exist or
	// be empty: a restore never overwrites a member's state.
	DataDir string
	// SkipHashCheck restores a file without (or despite) its sha256
	// trailer, as etcdutl's --skip-hash-check: for a backend file copied
	// from an etcd data directory (member/snap/db), which has none.
	SkipHashCheck bool
	Logger        *slog.Logger
}

// Summary says what a restore loaded.
type Summary struct {
	// Format is what the file was: "janus" (an etcd backend file written
	// by Janus, restored from its janus bucket), "etcd" (a backend file
	// from etcd), "janus-native" (Janus's own snapshot format), or
	// "zookeeper" (a ZooKeeper data directory).
	Format string
	Rev    int64
	Keys   int
	Leases int
}

// restoredIndex is the applied index a state converted from another system
// is restored at: any index works for a new log (zab starts the log after
// it), and every member of a cluster restored from the same file must get
// the same one.
const restoredIndex = 1

// snapshotSumLen is the length of the sha256 trailer etcdctl appends.
const snapshotSumLen = sha256.Size

// RestoreFile restores a snapshot file into a new data directory: an etcd
// backend file saved from Janus or from etcd by `etcdctl snapshot save`,
// or a snapshot in Janus's own format. A file saved by etcdctl carries the
// sha256 of its content as a 32-byte trailer (its size is then 32 more
// than a multiple of 512); it is checked first, and a file that fails the
// check, or has no trailer, is refused unless cfg.SkipHashCheck.
func RestoreFile(path string, cfg RestoreConfig) (Summary, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkEmptyDir(cfg.DataDir); err != nil {
		return Summary{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	size := fi.Size()
	if size%512 == snapshotSumLen {
		if !cfg.SkipHashCheck {
			if err := checkSum(f, size); err != nil {
				return Summary{}, fmt.Errorf("backup: %s is damaged: %w (use --skip-hash-check to restore it anyway)", path, err)
			}
		}
		size -= snapshotSumLen
	} else if !cfg.SkipHashCheck {
		return Summary{}, fmt.Errorf("backup: %s has no sha256 trailer, so it cannot be verified: "+
			"it was not saved by etcdctl snapshot save, or it was cut short (use --skip-hash-check to restore it anyway)", path)
	}
	content := io.NewSectionReader(f, 0, size)

	var magic [8]byte
	if _, err := content.ReadAt(magic[:], 0); err != nil {
		return Summary{}, fmt.Errorf("backup: %s is too short to be a snapshot: %w", path, err)
	}
	if string(magic[:]) == "janussn1" {
		return restoreNative(cfg, "janus-native", content)
	}
	return restoreBackendFile(cfg, content)
}

// checkSum compares the sha256 of the first size-32 bytes of f with its
// last 32 bytes.
func checkSum(f *os.File, size int64) error {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size-snapshotSumLen)); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	want := make([]byte, snapshotSumLen)
	if _, err := f.ReadAt(want, size-snapshotSumLen); err != nil {
		return fmt.Errorf("read its sha256 trailer: %w", err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("sha256 of its content is %x, its trailer says %x", got, want)
	}
	return nil
}

func checkEmptyDir(dir string) error {
	if dir == "" {
		return errors.New("backup: no data directory")
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: data directory: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("backup: data directory %s is not empty: a restore only fills a new one", dir)
	}
	return nil
}

// restoreNative loads a snapshot in Janus's own format into the data
// directory's state, removing what it made if that fails.
func restoreNative(cfg RestoreConfig, format string, r io.Reader) (sum Summary, err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(filepath.Join(cfg.DataDir, stateDir))
		}
	}()
	st, err := store.Open(store.Config{Dir: filepath.Join(cfg.DataDir, stateDir), Logger: cfg.Logger})
	if err != nil {
		return Summary{}, fmt.Errorf("backup: open new state: %w", err)
	}
	if err := st.RestoreSnapshot(r); err != nil {
		st.Close()
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	if _, err := st.Sync(); err != nil {
		st.Close()
		return Summary{}, fmt.Errorf("backup: sync restored state: %w", err)
	}
	sum = Summary{Format: format, Rev: st.Rev()}
	if v, err := st.Latest(); err == nil {
		v.Range(nil, nil, func(*core.Node) bool { sum.Keys++; return true })
		v.Leases(func(*core.Lease) bool { sum.Leases++; return true })
		v.Close()
	}
	if err := st.Close(); err != nil {
		return Summary{}, fmt.Errorf("backup: close restored state: %w", err)
	}
	return sum, nil
}

// stateDir is the state directory a member opens when its data directory
// names no other (server's defaultStateDir).
const stateDir = "state"

// restoreState restores a whole state given as a Batch (see
// store.WriteStateSnapshot), streaming its snapshot into the store.
func restoreState(cfg RestoreConfig, format string, state *core.Batch) (Summary, error) {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(store.WriteStateSnapshot(pw, restoredIndex, state))
	}()
	sum, err := restoreNative(cfg, format, pr)
	pr.Close()
	return sum, err
}

// restoreBackendFile restores an etcd backend file: from its janus bucket
// when Janus wrote it, else from its key and lease buckets.
func restoreBackendFile(cfg RestoreConfig, content *io.SectionReader) (sum Summary, err error) {
	// bbolt panics on some damaged pages; a file restored with
	// --skip-hash-check may have them.
	defer func() {
		if p := recover(); p != nil {
			os.RemoveAll(filepath.Join(cfg.DataDir, stateDir))
			sum, err = Summary{}, fmt.Errorf("backup: the etcd backend file is damaged: %v", p)
		}
	}()
	// bbolt maps a whole file; the trailer must go, so the content is
	// copied beside the new data directory first (as etcdutl does).
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.CreateTemp(cfg.DataDir, "restore-*.db")
	if err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, content)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Summary{}, fmt.Errorf("backup: copy the snapshot: %w", err)
	}
	db, err := bolt.Open(tmp.Name(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return Summary{}, fmt.Errorf("backup: not an etcd backend file or a Janus snapshot: %w", err)
	}
	defer db.Close()
	tx, err := db.Begin(false)
	if err != nil {
		return Summary{}, fmt.Errorf("backup: read the etcd backend file: %w", err)
	}
	defer tx.Rollback()
	if b := tx.Bucket(bucketJanus); b != nil {
		fp, err := etcdFingerprint(tx, etcdRev(tx))
		if err != nil {
			return Summary{}, err
		}
		if bytes.Equal(fp, b.Get(janusState)) {
			return restoreNative(cfg, "janus", newChunkReader(b))
		}
		cfg.Logger.Warn("the file was written by Janus, then changed by etcd: restoring etcd's keys and leases, " +
			"without the ZooKeeper metadata Janus kept beside them")
	}
	state, err := readEtcdState(tx, cfg.Logger)
	if err != nil {
		return Summary{}, err
	}
	return restoreState(cfg, "etcd", state)
}

// readEtcdState reads the latest state of an etcd backend file: each
// key's newest revision unless it is a tombstone, every lease, and the
// current revision.
func readEtcdState(tx *bolt.Tx, log *slog.Logger) (*core.Batch, error) {
	kb, mb := tx.Bucket(bucketKey), tx.Bucket(bucketMeta)
	if kb == nil || mb == nil {
		return nil, errors.New("backup: not an etcd backend file: no key or meta bucket")
	}
	rev := etcdRev(tx)
	latest := map[string]*mvccpb.KeyValue{}
	err := kb.ForEach(func(k, v []byte) error {
		if len(k) != revBytesLen && !(len(k) == revBytesLen+1 && k[revBytesLen] == markTombstone) {
			return fmt.Errorf("backup: key bucket holds %x, not a revision", k)
		}
		kv := &mvccpb.KeyValue{}
		if err := proto.Unmarshal(v, kv); err != nil {
			return fmt.Errorf("backup: revision %x: %w", k, err)
		}
		if len(k) > revBytesLen {
			delete(latest, string(kv.Key))
		} else {
			latest[string(kv.Key)] = kv
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	auth, err := readEtcdAuth(tx)
	if err != nil {
		return nil, err
	}
	state := &core.Batch{Meta: &core.Meta{Rev: max(rev, 1), Auth: auth}}
	leases := map[int64]bool{}
	if lb := tx.Bucket(bucketLease); lb != nil {
		err := lb.ForEach(func(k, v []byte) error {
			l := &leasepb.Lease{}
			if err := proto.Unmarshal(v, l); err != nil {
				return fmt.Errorf("backup: lease %x: %w", k, err)
			}
			leases[l.ID] = true
			state.Leases = append(state.Leases, core.LeaseWrite{ID: l.ID, Lease: &core.Lease{ID: l.ID, TTL: l.TTL}})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	nodes := make([]*core.Node, 0, len(keys))
	for _, k := range keys {
		kv := latest[k]
		if len(kv.Key) == 0 || len(kv.Key) > core.MaxKeyBytes {
			return nil, fmt.Errorf("backup: key of %d bytes: Janus stores keys of 1 to %d bytes", len(kv.Key), core.MaxKeyBytes)
		}
		n := &core.Node{Key: kv.Key, Value: kv.Value, CreateRev: kv.CreateRevision, ModRev: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
		if n.Value == nil {
			n.Value = []byte{}
		}
		if n.Lease != 0 && !leases[n.Lease] {
			// etcd itself would fail to attach it on start.
			log.Warn("key attached to a lease the file does not hold; restored without it", "key", k, "lease", n.Lease)
			n.Lease = 0
		}
		nodes = append(nodes, n)
		state.Nodes = append(state.Nodes, core.NodeWrite{Key: n.Key, Node: n})
		if n.Lease != 0 {
			state.LeaseKeys = append(state.LeaseKeys, core.LeaseKeyWrite{ID: n.Lease, Key: n.Key, Present: true})
		}
	}
	state.Dirs, state.Children = buildTree(nodes, nil)
	return state, nil
}

// systemRev is the lowest revision a restored node gets: ZooKeeper makes
// /zookeeper and /zookeeper/quota at zxid 0, and a revision 0 reads as
// "absent" in etcd compares.
const systemRev = 1

// buildTree computes the ZooKeeper tree records of a set of nodes sorted
// by key, as core.Apply would have left them had each node been created
// at its create revision: every node whose key is a tree path is a child
// of its parent, and parents that are not nodes are implicit. zkDirs, when
// not nil, gives the cversion and pzxid a ZooKeeper server kept for a path
// (its sequence counter is the cversion, as in ZooKeeper); without it each
// child counts one create.
func buildTree(nodes []*core.Node, zkDirs map[string]*core.Dir) ([]core.DirWrite, []core.ChildWrite) {
	stored := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		stored[string(n.Key)] = true
	}
	dirs := map[string]*core.Dir{}
	var order []string
	var children []core.ChildWrite
	var add func(path []byte, rev int64)
	add = func(path []byte, rev int64) {
		parent, _ := core.ParentPath(path)
		d := dirs[string(parent)]
		if d == nil {
			d = &core.Dir{}
			dirs[string(parent)] = d
			order = append(order, string(parent))
		}
		root := string(parent) == core.RootPath
		visible := root || d.NumChildren > 0 || stored[string(parent)]
		d.NumChildren++
		d.Cversion++
		d.Seq++
		d.Pzxid = max(d.Pzxid, rev)
		if !root && !stored[string(parent)] {
			if !visible || rev < d.ImplicitRev {
				d.ImplicitRev = rev
			}
		}
		children = append(children, core.ChildWrite{Parent: parent, Name: core.BaseName(path), Present: true})
		if !visible {
			add(parent, rev)
		}
	}
	for _, n := range nodes {
		if core.IsTreePath(n.Key) && string(n.Key) != core.RootPath {
			add(n.Key, n.CreateRev)
		}
	}
	// ZooKeeper keeps a cversion for nodes whose children are all gone.
	for p := range zkDirs {
		if dirs[p] == nil {
			dirs[p] = &core.Dir{}
			order = append(order, p)
		}
	}
	slices.Sort(order)
	writes := make([]core.DirWrite, 0, len(order))
	for _, p := range order {
		d := dirs[p]
		if z := zkDirs[p]; z != nil {
			d.Cversion, d.Seq = z.Cversion, z.Cversion
			if z.Pzxid != 0 {
				d.Pzxid = z.Pzxid
			}
		}
		writes = append(writes, core.DirWrite{Path: []byte(p), Dir: d})
	}
	return writes, children
}
