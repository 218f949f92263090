package cluster

import (
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestKillAllVerdictCatchesFaults feeds TestClusterKillAll's verdict a
// consistent end state, which must pass, and then the same state with one
// fault injected at a time, each of which must be reported: the checks of
// the whole-cluster kill test can fail.
func TestKillAllVerdictCatchesFaults(t *testing.T) {
	put := func(rev int64, key, value string, create, version int64) event {
		return event{Rev: rev, Type: mvccpb.PUT, Key: key, Value: value, Create: create, Mod: rev, Version: version}
	}
	del := func(rev int64, key string) event { return event{Rev: rev, Type: mvccpb.DELETE, Key: key, Mod: rev} }
	history := []event{
		put(2, "/ka/w/a", "va", 2, 1),
		put(3, "/ka/lock/x", "", 3, 1),
		put(4, "/ka/fence", "/ka/lock/x", 4, 1),
		del(5, "/ka/lock/x"),
		put(6, "/ka/lock/y", "", 6, 1),
		put(7, "/ka/fence", "/ka/lock/y", 4, 2),
		put(8, "/ka/l/b", "vb", 8, 1),
		del(9, "/ka/l/b"),
		put(10, "/ka/w/c", "vc", 10, 1),
		del(11, "/ka/w/c"),
	}
	base := func() (*killLoad, killAllState) {
		l := &killLoad{
			acks:      map[string]int{},
			puts:      map[string]ackedPut{"/ka/w/a": {"va", 2}, "/ka/l/b": {"vb", 8}, "/ka/w/c": {"vc", 10}},
			deletes:   map[string]int64{"/ka/w/c": 11},
			uncertain: map[string]bool{},
			revoked:   map[string]int64{"/ka/l/b": 9},
			fences:    []ackedPut{{"/ka/lock/x", 4}, {"/ka/lock/y", 7}},
			revs:      map[int][]int64{0: {2, 8, 9, 10, 11}, 3: {4, 7}},
		}
		for _, k := range killAllKinds {
			l.acks[k] = minPerFault
		}
		s := killAllState{
			ids:    []uint64{1, 2, 3},
			hashes: []uint32{7, 7, 7},
			final:  map[string]int64{"/ka/w/a": 2, "/ka/lock/y": 6, "/ka/fence": 7},
		}
		for range 3 {
			s.histories = append(s.histories, slices.Clone(history))
		}
		return l, s
	}
	everywhere := func(s *killAllState, f func([]event) []event) {
		for i := range s.histories {
			s.histories[i] = f(s.histories[i])
		}
	}
	without := func(rev int64) func([]event) []event {
		return func(h []event) []event { return slices.DeleteFunc(h, func(e event) bool { return e.Rev == rev }) }
	}
	if l, s := base(); len(l.verdict(s)) != 0 {
		t.Fatalf("a consistent end state fails: %v", l.verdict(s))
	}
	for _, tc := range []struct {
		fault  string
		inject func(*killLoad, *killAllState)
		want   string
	}{
		{"a member applied another value", func(_ *killLoad, s *killAllState) { s.histories[2][8].Value = "other" }, "members 1 and 3 DIVERGE"},
		{"a member is missing the tail", func(_ *killLoad, s *killAllState) { s.histories[1] = s.histories[1][:9] }, "prefix"},
		{"an acknowledged put is not in the history", func(_ *killLoad, s *killAllState) { everywhere(s, without(2)) }, "put /ka/w/a"},
		{"an acknowledged put is gone at the end", func(_ *killLoad, s *killAllState) { delete(s.final, "/ka/w/a") }, "put /ka/w/a@2"},
		{"an acknowledged delete did not happen", func(_ *killLoad, s *killAllState) { s.final["/ka/w/c"] = 10 }, "delete of /ka/w/c"},
		{"an acknowledged delete is not in the history", func(_ *killLoad, s *killAllState) { everywhere(s, without(11)) }, "delete /ka/w/c@11"},
		{"a revoked lease's key was not deleted", func(_ *killLoad, s *killAllState) { everywhere(s, without(9)) }, "revoke of /ka/l/b"},
		{"a fenced write is lost", func(l *killLoad, _ *killAllState) { l.fences[1].Rev = 6 }, "fenced write by /ka/lock/y@6"},
		{"a stale holder's fenced write committed", func(_ *killLoad, s *killAllState) {
			everywhere(s, func(h []event) []event { h[5].Value = "/ka/lock/x"; return h })
		}, "fencing tokens out of commit order"},
		{"HashKV differs", func(_ *killLoad, s *killAllState) { s.hashes[1] = 8 }, "HashKV"},
		{"a client saw the revision go back", func(l *killLoad, _ *killAllState) { l.revs[3] = []int64{7, 4} }, "went back"},
		{"a client was told something wrong", func(l *killLoad, _ *killAllState) { l.errs = []string{"get returned nothing"} }, "get returned nothing"},
		{"no lock was held after a round", func(l *killLoad, _ *killAllState) { l.acks["lock hold"] = 0 }, "too little"},
	} {
		l, s := base()
		tc.inject(l, &s)
		problems := l.verdict(s)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%s: problems %q, want one naming %q", tc.fault, problems, tc.want)
		}
	}
}
