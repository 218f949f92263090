package store

import (
	"fmt"
	"testing"
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
