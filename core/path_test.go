package core

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestIsTreePath(t *testing.T) {
	cases := map[string]bool{
		"/": true, "/a": true, "/a/b": true, "/a.b": true, "/.a": true, "/a/...": true, "/ü": true,
		"": false, "a": false, "/a/": false, "//": false, "/a//b": false, "/.": false, "/a/..": false,
		"/a/./b": false, "/a\x00b": false, "/a\x1fb": false, "/a\x7f": false, "/a\u0085": false,
		"/a\ue000": false, "/a\ufff0": false, "/a\U0001F600": false, "/a\xff": false,
	}
	for p, want := range cases {
		if got := IsTreePath([]byte(p)); got != want {
			t.Errorf("IsTreePath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestParentAndJoin(t *testing.T) {
	for _, c := range []struct{ path, parent, base string }{{"/a", "/", "a"}, {"/a/b", "/a", "b"}, {"/a/b/c", "/a/b", "c"}} {
		p, ok := ParentPath([]byte(c.path))
		if !ok || string(p) != c.parent || string(BaseName([]byte(c.path))) != c.base {
			t.Errorf("%s: parent %q base %q", c.path, p, BaseName([]byte(c.path)))
		}
		if j := JoinPath(p, BaseName([]byte(c.path))); string(j) != c.path {
			t.Errorf("join gives %q, want %q", j, c.path)
		}
	}
	if _, ok := ParentPath([]byte("/")); ok {
		t.Error("the root has a parent")
	}
}

// FuzzIsTreePath holds IsTreePath to ZooKeeper's rule stated plainly: split
// into components, then every character decoded and judged.
func FuzzIsTreePath(f *testing.F) {
	for _, p := range []string{"/", "/a/b", "/a//b", "/a/.", "/..", "/a/", "/ü", "/a\x7f", "/a\xff", "/a\U0001F600", "/\ufff0"} {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		if got, want := IsTreePath(key), treePathByTheRule(key); got != want {
			t.Fatalf("IsTreePath(%q) = %v, the rule says %v", key, got, want)
		}
	})
}

func treePathByTheRule(key []byte) bool {
	s := string(key)
	if s == "/" {
		return true
	}
	if !strings.HasPrefix(s, "/") {
		return false
	}
	for _, c := range strings.Split(s[1:], "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || !validPathRune(r) {
			return false
		}
		i += size
	}
	return true
}
