package store

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/januskv/janus/core"
)

func TestRecordCacheGenerations(t *testing.T) {
	c := newRecordCache(4 * (cacheEntryOverhead + 8))
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	c.add(key(0), []byte("v0"), 0)
	c.add(key(1), nil, 0)
	if enc, ok := c.get(key(1), 0); !ok || enc != nil {
		t.Fatalf("absent record: %q %v, want cached nil", enc, ok)
	}
	// Filling a generation moves k0 and k1 to the old one; a hit brings k0
	// back, so it survives the next turn while k1 does not.
	for i := 2; i < 4; i++ {
		c.add(key(i), []byte("vv"), 0)
	}
	if enc, ok := c.get(key(0), 0); !ok || string(enc) != "v0" {
		t.Fatalf("k0 = %q %v after one generation", enc, ok)
	}
	c.add(key(4), []byte("vv"), 0)
	if _, ok := c.get(key(1), 0); ok {
		t.Fatal("k1 outlived two generations unused")
	}
	if enc, ok := c.get(key(0), 0); !ok || string(enc) != "v0" {
		t.Fatalf("k0 = %q %v, want kept by its hit", enc, ok)
	}
	// Writes refresh cached keys and admit no others.
	c.advance(1, func(set func(key, enc []byte)) {
		set(key(0), []byte("v0'"))
		set(key(9), []byte("v9"))
	})
	if enc, _ := c.get(key(0), 1); string(enc) != "v0'" {
		t.Fatalf("k0 = %q after update", enc)
	}
	if _, ok := c.get(key(9), 1); ok {
		t.Fatal("update admitted an uncached key")
	}
	off := newRecordCache(-1)
	off.add(key(0), []byte("v"), 0)
	if _, ok := off.get(key(0), 0); ok {
		t.Fatal("a disabled cache answered")
	}
}

// A reader of an older state than the cache's must neither see a record
// written after its state nor leave one behind for readers of the newer
// state: the cache keeps, per entry, the applied index from which it holds.
func TestRecordCacheVersions(t *testing.T) {
	c := newRecordCache(1 << 20)
	k, other := []byte("/k"), []byte("/other")
	c.reset(5)
	c.add(k, []byte("at5"), 5)
	c.add(other, []byte("o5"), 5)
	c.advance(7, func(set func(key, enc []byte)) { set(k, []byte("at7")) })
	if _, ok := c.get(k, 5); ok {
		t.Fatal("a reader at 5 got the record written at 7")
	}
	if enc, ok := c.get(other, 5); !ok || string(enc) != "o5" {
		t.Fatalf("a record unchanged since 5 = %q %v at 5, want o5", enc, ok)
	}
	if enc, ok := c.get(k, 7); !ok || string(enc) != "at7" {
		t.Fatalf("k = %q %v at 7, want at7", enc, ok)
	}
	// A reader still at 5 read k from Badger and adds it late: refused.
	c.add(k, []byte("at5"), 5)
	c.add([]byte("/new"), []byte("n5"), 5)
	if enc, _ := c.get(k, 7); string(enc) != "at7" {
		t.Fatalf("a late add from a reader at 5 replaced k with %q", enc)
	}
	if _, ok := c.get([]byte("/new"), 7); ok {
		t.Fatal("a late add from a reader at 5 was admitted")
	}
	// A delete is cached as absent from its index on.
	c.advance(9, func(set func(key, enc []byte)) { set(k, nil) })
	if enc, ok := c.get(k, 9); !ok || enc != nil {
		t.Fatalf("deleted k = %q %v at 9, want cached absent", enc, ok)
	}
	c.reset(20)
	if _, ok := c.get(other, 20); ok {
		t.Fatal("reset kept an entry")
	}
}

// A setData reads its node's Dir, which a leaf lacks: that absence is
// cached, and a child created later replaces it, so the parent's Stat
// counts the child.
func TestAbsentDirOfANodeIsCached(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var index uint64
	apply := func(op core.TxnOp) core.OpResult {
		t.Helper()
		return applyOne(t, s, &index, op)
	}
	leaf := []byte("/leaf")
	apply(core.TxnOp{Kind: core.OpCreate, Key: leaf, Value: []byte("a")})
	if _, ok := s.dirCache.get(leaf, index); ok {
		t.Fatal("a create cached the absent Dir of its new path")
	}
	apply(core.TxnOp{Kind: core.OpSetData, Key: leaf, Value: []byte("b"), ExpectedVersion: -1})
	if enc, ok := s.dirCache.get(leaf, index); !ok || enc != nil {
		t.Fatalf("after setData the leaf's Dir is cached %v as %q, want cached absent", ok, enc)
	}
	apply(core.TxnOp{Kind: core.OpCreate, Key: []byte("/leaf/child"), Value: []byte("c")})
	r := apply(core.TxnOp{Kind: core.OpSetData, Key: leaf, Value: []byte("d"), ExpectedVersion: -1})
	if r.Dir == nil || r.Dir.NumChildren != 1 {
		t.Fatalf("setData of a parent after its child's create: Dir %+v, want 1 child", r.Dir)
	}
}

// TestDecodedNodeIsKeptAndShared checks the node the cache keeps decoded:
// the first read of a cached record decodes it once, later reads get copies
// that a caller may change without touching the cache, a write replaces it,
// and a node read before the write keeps the value it was read with.
func TestDecodedNodeIsKeptAndShared(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var index uint64
	key := []byte("/n")
	applyOne(t, s, &index, core.TxnOp{Kind: core.OpCreate, Key: key, Value: []byte("one")})
	read := func() *core.Node {
		t.Helper()
		v, err := s.Latest()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		n, err := v.Node(key)
		if err != nil || n == nil {
			t.Fatalf("read %s: %v %v", key, n, err)
		}
		return n
	}
	decoded := func() *core.Node {
		e, _ := s.nodeCache.entry(key, index)
		return e.node
	}

	first := read() // a miss: read from Badger, admitted, decoded
	if decoded() == nil {
		t.Fatal("the first read left no decoded node in the cache")
	}
	kept := decoded()
	first.Version, first.Value = 99, []byte("changed by a caller")
	second := read()
	if decoded() != kept {
		t.Fatal("a hit decoded the record again")
	}
	if second == kept || second.Version != 1 || string(second.Value) != "one" {
		t.Fatalf("second read %+v, want a copy of the kept node at version 1", second)
	}

	applyOne(t, s, &index, core.TxnOp{Kind: core.OpSetData, Key: key, Value: []byte("two"), ExpectedVersion: -1})
	if decoded() != nil {
		t.Fatal("a write kept the old decoded node")
	}
	if n := read(); string(n.Value) != "two" || n.Version != 2 {
		t.Fatalf("after setData read %+v", n)
	}
	if string(second.Value) != "one" {
		t.Fatalf("a node read before the write now has value %q", second.Value)
	}

	// Only the very encoding an entry holds takes a decoded node: an equal
	// copy may be another reader's, admitted at another index.
	e, _ := s.nodeCache.entry(key, index)
	s.nodeCache.mu.Lock()
	e.node = nil
	s.nodeCache.cur[string(key)] = e
	s.nodeCache.mu.Unlock()
	s.nodeCache.keepDecoded(key, bytes.Clone(e.enc), kept)
	if decoded() != nil {
		t.Fatal("a node decoded from a copy of the record was kept")
	}
	s.nodeCache.keepDecoded(key, e.enc, kept)
	if decoded() != kept {
		t.Fatal("a node decoded from the entry's record was not kept")
	}
}

// TestCachedReadsMatchBadger reads every key through the caches of views of
// the latest state and of recent revisions, while groups of random entries are applied, and
// compares each answer with what Badger holds at the view's applied index.
// Views are kept across several groups, so that readers of an older state
// meet the caches after they moved on, and read each key twice, so that
// the second read is usually a hit.
func TestCachedReadsMatchBadger(t *testing.T) {
	h := newHarness(t, testSeed(t))
	for h.gen.index < 100 {
		h.step(h.groupSize())
	}
	keys := append(append([]string{"/"}, treePaths...), etcdKeys...)
	stop := make(chan struct{})
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := compareCached(h.s, keys, 2+r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for h.gen.index < 1500 {
		h.step(h.groupSize())
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h.checkLatest()
	if len(h.s.nodeCache.cur)+len(h.s.nodeCache.old) == 0 {
		t.Fatal("the readers admitted nothing to the node cache")
	}
}

// compareCached takes a view of the latest state and reads keys through it
// rounds times, each key twice, comparing every answer with Badger's.
func compareCached(s *Store, keys []string, rounds int) error {
	v, err := s.Latest()
	if rounds%2 == 1 {
		// A View of an older revision reads at an index that may lie
		// inside a group.
		v, err = s.At(s.Rev() - int64(rounds))
	}
	if errors.Is(err, core.ErrCompacted) {
		return nil // compacted past the state it loaded (see readOnce)
	}
	if err != nil {
		return err
	}
	defer v.Close()
	for range rounds {
		for _, k := range keys {
			for range 2 {
				key := []byte(k)
				got, err := v.Node(key)
				if err != nil {
					return err
				}
				want, err := v.reader.Node(key)
				if err != nil {
					return err
				}
				if !bytes.Equal(encodeNode(got), encodeNode(want)) {
					return fmt.Errorf("view at index %d: node %q is %+v through the cache, %+v in Badger", v.at, k, got, want)
				}
				gotDir, err := v.Dir(key)
				if err != nil {
					return err
				}
				wantDir, err := v.reader.Dir(key)
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(gotDir, wantDir) {
					return fmt.Errorf("view at index %d: Dir %q is %+v through the cache, %+v in Badger", v.at, k, gotDir, wantDir)
				}
			}
		}
	}
	return nil
}

func encodeNode(n *core.Node) []byte {
	if n == nil {
		return nil
	}
	return core.AppendNode(nil, n)
}

// TestDefaultCacheHoldsAHotKeyspace reads 20,000 nodes of 256-byte values
// (the bench tool's getData keyspace is 10,000) twice with the default
// cache size: once decoded, every entry costs about twice its record, and
// a budget sized for the records alone turned its generations over on
// every pass, so each read moved an entry from the old map to the new one.
func TestDefaultCacheHoldsAHotKeyspace(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const nodes = 20000
	path := func(i int) []byte { return fmt.Appendf(nil, "/bench/1733600000/getData/%016d", i) }
	var index uint64
	applyOne(t, s, &index, core.TxnOp{Kind: core.OpCreate, Key: []byte("/bench")})
	applyOne(t, s, &index, core.TxnOp{Kind: core.OpCreate, Key: []byte("/bench/1733600000")})
	applyOne(t, s, &index, core.TxnOp{Kind: core.OpCreate, Key: []byte("/bench/1733600000/getData")})
	applyLeafCreates(t, s, index, nodes, path)
	for pass := range 2 {
		for i := range nodes {
			v, err := s.Latest()
			if err != nil {
				t.Fatal(err)
			}
			if n, _, err := core.TreeNode(v, path(i)); err != nil || n == nil {
				t.Fatalf("pass %d: read %s: %v %v", pass, path(i), n, err)
			}
			v.Close()
		}
	}
	c := s.nodeCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.old != nil || len(c.cur) < nodes {
		t.Fatalf("after two passes over %d nodes the cache's current generation holds %d (%d bytes of %d) and the old one %d: the default cache does not hold them",
			nodes, len(c.cur), c.curBytes, c.half, len(c.old))
	}
}
