package store

import (
	"errors"
	"testing"

	"github.com/januskv/janus/core"
)

// TestApplyWhenPublishesOnlyOnceReady checks the contract a single member
// relies on to overlap Badger's write with its log's flush: while ready
// runs, readers still see the state before the group; a group whose ready
// succeeds is published; one whose ready fails is not.
func TestApplyWhenPublishesOnlyOnceReady(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := func(v *View, key string) string {
		t.Helper()
		n, err := v.Node([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if n == nil {
			return ""
		}
		return string(n.Value)
	}
	latest := func(key string) string {
		t.Helper()
		v, err := s.Latest()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		return value(v, key)
	}

	if _, _, err := s.Apply([]core.Entry{putEntry(1, []byte("k"), []byte("one"))}); err != nil {
		t.Fatal(err)
	}

	var seenDuringReady string
	_, _, err = s.ApplyWhen([]core.Entry{putEntry(2, []byte("k"), []byte("two"))}, func() error {
		seenDuringReady = latest("k")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seenDuringReady != "one" {
		t.Fatalf("while ready ran, a reader saw %q; want the state before the group (%q)", seenDuringReady, "one")
	}
	if got := latest("k"); got != "two" || s.AppliedIndex() != 2 {
		t.Fatalf("after ready: k=%q applied=%d, want two and 2", got, s.AppliedIndex())
	}

	diskFull := errors.New("disk full")
	_, _, err = s.ApplyWhen([]core.Entry{putEntry(3, []byte("k"), []byte("three"))}, func() error { return diskFull })
	if !errors.Is(err, diskFull) {
		t.Fatalf("ApplyWhen with a failing ready: err %v, want %v", err, diskFull)
	}
	if got := latest("k"); got != "two" || s.AppliedIndex() != 2 {
		t.Fatalf("after a failed ready: k=%q applied=%d, want two and 2", got, s.AppliedIndex())
	}
}
