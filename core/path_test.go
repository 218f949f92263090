package core

import "testing"

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
