package store

import (
	"fmt"
	"testing"

	"github.com/januskv/janus/core"
)

func TestRecordCacheGenerations(t *testing.T) {
	c := newRecordCache(4 * (cacheEntryOverhead + 8))
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	c.put(key(0), []byte("v0"))
	c.put(key(1), nil)
	if enc, ok := c.get(key(1)); !ok || enc != nil {
		t.Fatalf("absent record: %q %v, want cached nil", enc, ok)
	}
	// Filling a generation moves k0 and k1 to the old one; a hit brings k0
	// back, so it survives the next turn while k1 does not.
	for i := 2; i < 4; i++ {
		c.put(key(i), []byte("vv"))
	}
	if enc, ok := c.get(key(0)); !ok || string(enc) != "v0" {
		t.Fatalf("k0 = %q %v after one generation", enc, ok)
	}
	c.put(key(4), []byte("vv"))
	if _, ok := c.get(key(1)); ok {
		t.Fatal("k1 outlived two generations unused")
	}
	if enc, ok := c.get(key(0)); !ok || string(enc) != "v0" {
		t.Fatalf("k0 = %q %v, want kept by its hit", enc, ok)
	}
	// Writes refresh cached keys and admit no others.
	c.update(key(0), []byte("v0'"))
	c.update(key(9), []byte("v9"))
	if enc, _ := c.get(key(0)); string(enc) != "v0'" {
		t.Fatalf("k0 = %q after update", enc)
	}
	if _, ok := c.get(key(9)); ok {
		t.Fatal("update admitted an uncached key")
	}
	off := newRecordCache(-1)
	off.put(key(0), []byte("v"))
	if _, ok := off.get(key(0)); ok {
		t.Fatal("a disabled cache answered")
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
	if _, ok := s.dirCache.get(leaf); ok {
		t.Fatal("a create cached the absent Dir of its new path")
	}
	apply(core.TxnOp{Kind: core.OpSetData, Key: leaf, Value: []byte("b"), ExpectedVersion: -1})
	if enc, ok := s.dirCache.get(leaf); !ok || enc != nil {
		t.Fatalf("after setData the leaf's Dir is cached %v as %q, want cached absent", ok, enc)
	}
	apply(core.TxnOp{Kind: core.OpCreate, Key: []byte("/leaf/child"), Value: []byte("c")})
	r := apply(core.TxnOp{Kind: core.OpSetData, Key: leaf, Value: []byte("d"), ExpectedVersion: -1})
	if r.Dir == nil || r.Dir.NumChildren != 1 {
		t.Fatalf("setData of a parent after its child's create: Dir %+v, want 1 child", r.Dir)
	}
}
