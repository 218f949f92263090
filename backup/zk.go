package backup

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/translate"
)

// A ZooKeeper 3.8 data directory (version-2/) holds fuzzy snapshots
// (snapshot.<zxid>: the tree as of at least that zxid) and transaction
// logs (log.<zxid>: every transaction from that zxid on), both in jute's
// binary encoding. Restoring one, as ZooKeeper does at start: load the
// newest snapshot whose checksum holds, then apply every logged
// transaction after its zxid. The rules of applying follow ZooKeeper's
// DataTree (createNode, deleteNode, setData, setACL, killSession) so that
// cversion, pzxid and versions come out as ZooKeeper's own.

const (
	zkSnapMagic = 0x5a4b534e // "ZKSN"
	zkLogMagic  = 0x5a4b4c47 // "ZKLG"

	// ZooDefs.OpCode values found in transaction logs.
	zkOpCreate          = 1
	zkOpDelete          = 2
	zkOpSetData         = 5
	zkOpSetACL          = 7
	zkOpCheck           = 13
	zkOpMulti           = 14
	zkOpCreate2         = 15
	zkOpReconfig        = 16
	zkOpCreateContainer = 19
	zkOpDeleteContainer = 20
	zkOpCreateTTL       = 21
	zkOpCreateSession   = -10
	zkOpCloseSession    = -11
	zkOpError           = -1

	// EphemeralType's markers in ephemeralOwner.
	zkContainerOwner = int64(-1 << 63)
	zkTTLMask        = int64(-1 << 56) // top byte 0xFF; the TTL below it

	// zkMaxRecord bounds one length-prefixed field: far above jute.maxbuffer.
	zkMaxRecord = 1 << 30
)

// zkNode is a znode as ZooKeeper's DataTree holds it.
type zkNode struct {
	data                        []byte
	acl                         []core.ACL
	czxid, mzxid, ctime, mtime  int64
	version, cversion, aversion int32
	ephemeralOwner, pzxid       int64
	children                    int
}

// zkTree is ZooKeeper's state: nodes by path (the root is "/"), sessions
// with their timeouts, and the last zxid applied.
type zkTree struct {
	nodes    map[string]*zkNode
	sessions map[int64]int32
	zxid     int64
}

// RestoreZooKeeper restores a ZooKeeper data directory (its version-2
// directory, or the directory holding it) into a new data directory.
// ZooKeeper must not be running on it.
func RestoreZooKeeper(dir string, cfg RestoreConfig) (Summary, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkEmptyDir(cfg.DataDir); err != nil {
		return Summary{}, err
	}
	if fi, err := os.Stat(filepath.Join(dir, "version-2")); err == nil && fi.IsDir() {
		dir = filepath.Join(dir, "version-2")
	}
	tree, err := loadZooKeeper(dir, cfg.Logger)
	if err != nil {
		return Summary{}, err
	}
	state, err := tree.state()
	if err != nil {
		return Summary{}, err
	}
	return restoreState(cfg, "zookeeper", state)
}

// zkFiles lists the files of dir named prefix.<hex zxid>, by zxid.
func zkFiles(dir, prefix string) ([]string, []int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("backup: ZooKeeper data directory: %w", err)
	}
	type file struct {
		name string
		zxid int64
	}
	var files []file
	for _, e := range entries {
		hex, ok := strings.CutPrefix(e.Name(), prefix+".")
		if !ok || e.IsDir() {
			continue
		}
		z, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			continue
		}
		files = append(files, file{filepath.Join(dir, e.Name()), int64(z)})
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(a.zxid, b.zxid) })
	names, zxids := make([]string, len(files)), make([]int64, len(files))
	for i, f := range files {
		names[i], zxids[i] = f.name, f.zxid
	}
	return names, zxids, nil
}

func loadZooKeeper(dir string, log *slog.Logger) (*zkTree, error) {
	snaps, snapZxids, err := zkFiles(dir, "snapshot")
	if err != nil {
		return nil, err
	}
	logs, _, err := zkFiles(dir, "log")
	if err != nil {
		return nil, err
	}
	if len(snaps) == 0 {
		return nil, fmt.Errorf("backup: %s holds no snapshot.N file: not a ZooKeeper 3.8 data directory", dir)
	}
	var tree *zkTree
	// As ZooKeeper, the newest snapshot whose checksum holds.
	for i := len(snaps) - 1; i >= 0 && tree == nil; i-- {
		t, err := readZKSnapshot(snaps[i])
		if err != nil {
			log.Warn("skipping a ZooKeeper snapshot", "file", snaps[i], "err", err)
			continue
		}
		t.zxid = snapZxids[i]
		tree = t
	}
	if tree == nil {
		return nil, fmt.Errorf("backup: no valid snapshot in %s", dir)
	}
	for _, name := range logs {
		if err := tree.replayLog(name); err != nil {
			return nil, err
		}
	}
	return tree, nil
}

// juteReader decodes jute's binary archive (big-endian, length-prefixed)
// and keeps the first error.
type juteReader struct {
	r   io.Reader
	err error
}

func (j *juteReader) full(n int) []byte {
	if j.err != nil {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(j.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		j.err = err
		return nil
	}
	return b
}

func (j *juteReader) int() int32 {
	b := j.full(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (j *juteReader) long() int64 {
	b := j.full(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (j *juteReader) bool() bool {
	b := j.full(1)
	return b != nil && b[0] != 0
}

// buffer reads a length-prefixed byte string; -1 is null.
func (j *juteReader) buffer() []byte {
	n := j.int()
	if j.err != nil || n < 0 {
		return nil
	}
	if n > zkMaxRecord {
		j.err = fmt.Errorf("field of %d bytes", n)
		return nil
	}
	if n <= 64<<10 {
		return j.full(int(n))
	}
	// A damaged length must not allocate what the file does not hold.
	b, err := io.ReadAll(io.LimitReader(j.r, int64(n)))
	if err == nil && len(b) < int(n) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		j.err = err
		return nil
	}
	return b
}

func (j *juteReader) string() string { return string(j.buffer()) }

// acls reads a vector<ACL>: perms, then the Id's scheme and id.
func (j *juteReader) acls() []core.ACL {
	n := j.int()
	if j.err != nil || n < 0 {
		return nil
	}
	// Grown as entries are read: a damaged count stops at the end of input.
	var acl []core.ACL
	for ; n > 0 && j.err == nil; n-- {
		a := core.ACL{Perms: core.Perm(j.int())}
		a.ID.Scheme = j.string()
		a.ID.ID = j.string()
		acl = append(acl, a)
	}
	return acl
}

// readZKSnapshot reads FileSnap's format: the file header, the sessions,
// the ACL cache, every node depth first ending with the path "/", then the
// Adler-32 of all of it.
func readZKSnapshot(path string) (*zkTree, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sum := adler32.New()
	j := &juteReader{r: io.TeeReader(bufio.NewReaderSize(f, 256<<10), sum)}
	if magic := j.int(); j.err == nil && magic != zkSnapMagic {
		return nil, fmt.Errorf("not a ZooKeeper snapshot (magic %#x)", magic)
	}
	j.int()  // version
	j.long() // dbid
	t := &zkTree{nodes: map[string]*zkNode{}, sessions: map[int64]int32{}}
	for n := j.int(); n > 0 && j.err == nil; n-- {
		id := j.long()
		t.sessions[id] = j.int()
	}
	acls := map[int64][]core.ACL{}
	for n := j.int(); n > 0 && j.err == nil; n-- {
		id := j.long()
		acls[id] = j.acls()
	}
	for j.err == nil {
		p := j.string()
		if p == "/" {
			break
		}
		n := &zkNode{data: j.buffer()}
		aclID := j.long()
		n.czxid, n.mzxid, n.ctime, n.mtime = j.long(), j.long(), j.long(), j.long()
		n.version, n.cversion, n.aversion = j.int(), j.int(), j.int()
		n.ephemeralOwner, n.pzxid = j.long(), j.long()
		if aclID != -1 { // -1 is OPEN_ACL_UNSAFE, the nil ACL
			a, ok := acls[aclID]
			if !ok && j.err == nil {
				return nil, fmt.Errorf("node %q refers to ACL %d, which the snapshot does not hold", p, aclID)
			}
			n.acl = a
		}
		if p == "" {
			p = "/"
		} else if parent := t.nodes[zkParent(p)]; parent != nil {
			parent.children++
		} else if j.err == nil {
			return nil, fmt.Errorf("node %q comes before its parent", p)
		}
		t.nodes[p] = n
	}
	want := sum.Sum32()
	got := j.long()
	if j.err != nil {
		return nil, fmt.Errorf("read %s: %w", path, j.err)
	}
	if uint32(got) != want {
		return nil, fmt.Errorf("%s: checksum %#x, content sums to %#x", path, got, want)
	}
	if t.nodes["/"] == nil {
		return nil, fmt.Errorf("%s: no root node", path)
	}
	return t, nil
}

func zkParent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// replayLog applies every transaction of a FileTxnLog file after the
// tree's zxid: the file header, then entries of an Adler-32, the length
// and bytes of the transaction and an end-of-record byte 'B', until a zero
// length (the preallocated tail) or the end of the file.
func (t *zkTree) replayLog(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	j := &juteReader{r: bufio.NewReaderSize(f, 256<<10)}
	magic := j.int()
	j.int()
	j.long()
	if j.err != nil {
		// An empty or cut header: ZooKeeper too skips a log with no entry.
		return nil
	}
	if magic != zkLogMagic {
		return fmt.Errorf("backup: %s is not a ZooKeeper transaction log (magic %#x)", path, magic)
	}
	for i := 0; ; i++ {
		crc := j.long()
		n := j.int()
		if j.err != nil || n == 0 {
			// The end of what was written. A torn last entry is one
			// ZooKeeper never acknowledged either.
			return nil
		}
		if n < 0 || n > zkMaxRecord {
			return fmt.Errorf("backup: %s entry %d: length %d", path, i, n)
		}
		txn := j.full(int(n))
		eor := j.full(1)
		if j.err != nil {
			return nil
		}
		if uint32(crc) != adler32.Checksum(txn) || eor[0] != 'B' {
			return fmt.Errorf("backup: %s entry %d is damaged (checksum or end-of-record mark)", path, i)
		}
		if err := t.applyTxn(txn); err != nil {
			return fmt.Errorf("backup: %s entry %d: %w", path, i, err)
		}
	}
}

// applyTxn applies one logged transaction: TxnHeader (client id, cxid,
// zxid, time, type) then its record.
func (t *zkTree) applyTxn(b []byte) error {
	j := &juteReader{r: bytes.NewReader(b)}
	client, _, zxid, time, typ := j.long(), j.int(), j.long(), j.long(), j.int()
	if j.err != nil {
		return j.err
	}
	if zxid <= t.zxid {
		return nil // in the snapshot already
	}
	t.zxid = zxid
	if typ == zkOpMulti {
		n := j.int()
		type sub struct {
			typ  int32
			data []byte
		}
		var subs []sub
		for ; n > 0 && j.err == nil; n-- {
			subs = append(subs, sub{j.int(), j.buffer()})
		}
		if j.err != nil {
			return j.err
		}
		// A multi with an error in it applied nothing.
		for _, s := range subs {
			if s.typ == zkOpError {
				return nil
			}
		}
		for _, s := range subs {
			if err := t.apply(client, zxid, time, s.typ, &juteReader{r: bytes.NewReader(s.data)}); err != nil {
				return err
			}
		}
		return nil
	}
	return t.apply(client, zxid, time, typ, j)
}

func (t *zkTree) apply(client, zxid, time int64, typ int32, j *juteReader) error {
	switch typ {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL:
		p, data, acl := j.string(), j.buffer(), j.acls()
		var owner int64
		switch typ {
		case zkOpCreateContainer:
			owner = zkContainerOwner
		case zkOpCreateTTL:
			// CreateTTLTxn: parentCVersion, then the TTL.
		default:
			if j.bool() {
				owner = client
			}
		}
		parentCVersion := j.int()
		if typ == zkOpCreateTTL {
			owner = zkTTLMask | j.long()
		}
		if j.err != nil {
			return j.err
		}
		t.create(p, data, acl, owner, parentCVersion, zxid, time)
	case zkOpDelete, zkOpDeleteContainer:
		p := j.string()
		if j.err != nil {
			return j.err
		}
		t.delete(p, zxid)
	case zkOpSetData, zkOpReconfig:
		p, data, version := j.string(), j.buffer(), j.int()
		if j.err != nil {
			return j.err
		}
		if n := t.nodes[p]; n != nil {
			n.data, n.version, n.mzxid, n.mtime = data, version, zxid, time
		}
	case zkOpSetACL:
		p, acl, version := j.string(), j.acls(), j.int()
		if j.err != nil {
			return j.err
		}
		if n := t.nodes[p]; n != nil {
			n.acl, n.aversion = acl, version
		}
	case zkOpCreateSession:
		timeout := j.int()
		if j.err != nil {
			return j.err
		}
		t.sessions[client] = timeout
	case zkOpCloseSession:
		delete(t.sessions, client)
		var gone []string
		for p, n := range t.nodes {
			if n.ephemeralOwner == client {
				gone = append(gone, p)
			}
		}
		// Deepest first never happens for ephemerals (they have no
		// children), but a stable order keeps the result deterministic.
		slices.Sort(gone)
		for _, p := range gone {
			t.delete(p, zxid)
		}
	case zkOpCheck, zkOpError:
	default:
		return fmt.Errorf("transaction type %d at zxid %#x is not one Janus knows how to restore", typ, zxid)
	}
	return nil
}

// create is DataTree.createNode: a node that exists already (a fuzzy
// snapshot holds it) is left alone but its parent's cversion still moves.
func (t *zkTree) create(p string, data []byte, acl []core.ACL, owner int64, parentCVersion int32, zxid, time int64) {
	parent := t.nodes[zkParent(p)]
	if parent == nil {
		return
	}
	if parentCVersion == -1 {
		parentCVersion = parent.cversion + 1
	}
	if parentCVersion > parent.cversion {
		parent.cversion, parent.pzxid = parentCVersion, zxid
	}
	if t.nodes[p] != nil {
		return
	}
	parent.children++
	t.nodes[p] = &zkNode{data: data, acl: acl, czxid: zxid, mzxid: zxid, ctime: time, mtime: time,
		ephemeralOwner: owner, pzxid: zxid}
}

// delete is DataTree.deleteNode: the parent's pzxid moves and its
// cversion counts the delete (as ZooKeeper 3.8.0 shows it: a create's
// logged parentCVersion does not include earlier deletes, the tree does).
func (t *zkTree) delete(p string, zxid int64) {
	parent := t.nodes[zkParent(p)]
	if parent == nil {
		return
	}
	parent.cversion++
	if zxid > parent.pzxid {
		parent.pzxid = zxid
	}
	if t.nodes[p] != nil {
		delete(t.nodes, p)
		parent.children--
	}
}

// zkSkipped says which znodes Janus does not take over: /zookeeper/config,
// the ensemble's own configuration (Janus has its own), and the other
// system nodes while nothing is written there: Janus's tree shows them
// without storing them (see core's system.go), as a brand-new Janus does.
func (t *zkTree) zkSkipped(p string) bool {
	if p == "/zookeeper/config" {
		return true
	}
	return core.IsSystemPath([]byte(p)) && len(t.nodes[p].data) == 0
}

// state turns the tree into a Janus state: each znode a node at its czxid
// and mzxid (revisions are zxids, so clients' last-seen zxids stay valid
// and the next write comes after every one of them), ephemerals attached
// to their session's lease, containers and TTL nodes in their modes, and
// the tree records with ZooKeeper's cversion and pzxid.
func (t *zkTree) state() (*core.Batch, error) {
	paths := make([]string, 0, len(t.nodes))
	var rev int64 = 1
	for p, n := range t.nodes {
		if p != "/" && !t.zkSkipped(p) {
			paths = append(paths, p)
		}
		rev = max(rev, n.czxid, n.mzxid, n.pzxid)
	}
	rev = max(rev, t.zxid)
	slices.Sort(paths)
	state := &core.Batch{Meta: &core.Meta{Rev: rev}}
	nodes := make([]*core.Node, 0, len(paths))
	dirs := map[string]*core.Dir{}
	for _, p := range paths {
		z := t.nodes[p]
		if !core.IsTreePath([]byte(p)) {
			return nil, fmt.Errorf("backup: ZooKeeper path %q is not one Janus accepts", p)
		}
		n := &core.Node{
			Key: []byte(p), Value: z.data, CreateRev: z.czxid, ModRev: z.mzxid,
			Version: int64(z.version) + 1, Ctime: z.ctime, Mtime: z.mtime,
			Aversion: z.aversion, ACL: z.acl,
		}
		if n.Value == nil {
			n.Value = []byte{}
		}
		n.CreateRev, n.ModRev = max(n.CreateRev, systemRev), max(n.ModRev, systemRev)
		switch o := z.ephemeralOwner; {
		case o == zkContainerOwner:
			n.Mode = core.ModeContainer
		case o&zkTTLMask == zkTTLMask && o != -1:
			n.Mode, n.TTL = core.ModeTTL, o&^zkTTLMask
		case o != 0:
			if _, ok := t.sessions[o]; !ok {
				// ZooKeeper itself would remove it at start.
				continue
			}
			n.Lease = o
			state.LeaseKeys = append(state.LeaseKeys, core.LeaseKeyWrite{ID: o, Key: n.Key, Present: true})
		}
		nodes = append(nodes, n)
		state.Nodes = append(state.Nodes, core.NodeWrite{Key: n.Key, Node: n})
		if z.cversion != 0 || z.children > 0 {
			dirs[p] = &core.Dir{Cversion: z.cversion, Pzxid: z.pzxid}
		}
	}
	if root := t.nodes["/"]; root != nil {
		dirs["/"] = &core.Dir{Cversion: root.cversion, Pzxid: root.pzxid}
	}
	ids := make([]int64, 0, len(t.sessions))
	for id := range t.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ms := t.sessions[id]
		state.Leases = append(state.Leases, core.LeaseWrite{ID: id, Lease: &core.Lease{
			ID: id, TTL: translate.LeaseTTL(ms), Session: &core.Session{TimeoutMs: ms, Password: zkSessionPassword(id)},
		}})
	}
	state.Dirs, state.Children = buildTree(nodes, dirs)
	return state, nil
}
