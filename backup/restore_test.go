package backup

import (
	"fmt"
	"testing"

	"github.com/januskv/janus/core"
)

func TestBuildTree(t *testing.T) {
	node := func(key string, rev int64) *core.Node { return &core.Node{Key: []byte(key), CreateRev: rev} }
	cases := []struct {
		name     string
		nodes    []*core.Node
		zk       map[string]*core.Dir
		dirs     string
		children int
	}{
		{"no tree paths", []*core.Node{node("a", 2), node("b/c", 3)}, nil, "[]", 0},
		{"top level", []*core.Node{node("/a", 2), node("/b", 5)},
			nil, "[/ {2 2 5 2 0 0}]", 2},
		// /x and /x/y are implicit: they appear with the oldest child.
		{"implicit parents", []*core.Node{node("/x/y/a", 7), node("/x/y/b", 4)},
			nil, "[/ {1 1 7 1 0 0} /x {1 1 7 1 7 0} /x/y {2 2 7 2 4 0}]", 4},
		{"stored parent", []*core.Node{node("/p", 2), node("/p/c", 3)},
			nil, "[/ {1 1 2 1 0 0} /p {1 1 3 1 0 0}]", 2},
		// ZooKeeper's cversion and pzxid win, its cversion is the sequence
		// counter, and a childless node keeps its cversion.
		{"zookeeper dirs", []*core.Node{node("/q", 2), node("/q/s-0000000004", 9), node("/e", 3)},
			map[string]*core.Dir{"/q": {Cversion: 6, Pzxid: 11}, "/e": {Cversion: 2, Pzxid: 8}},
			"[/ {2 2 3 2 0 0} /e {0 2 8 2 0 0} /q {1 6 11 6 0 0}]", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs, children := buildTree(c.nodes, c.zk)
			var got []string
			for _, d := range dirs {
				got = append(got, string(d.Path), fmt.Sprint(*d.Dir))
			}
			if s := fmt.Sprint(got); s != c.dirs {
				t.Errorf("dirs %s, want %s", s, c.dirs)
			}
			if len(children) != c.children {
				t.Errorf("%d child records, want %d", len(children), c.children)
			}
		})
	}
}
