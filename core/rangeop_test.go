package core_test

import (
	"testing"

	"github.com/januskv/janus/core"
)

func TestDoRange(t *testing.T) {
	h := newHarness(t)
	h.txn(put("a", "3"), put("b", "1"))
	h.txn(put("c", "2"))
	h.txn(put("a", "9"))
	keys := func(r core.OpResult) string {
		var s []string
		for _, n := range r.Nodes {
			s = append(s, string(n.Key))
		}
		return fmtList(s)
	}
	cases := []struct {
		name     string
		key, end string
		opts     core.RangeOptions
		want     string
		count    int64
		more     bool
	}{
		{"all", "\x00", "\x00", core.RangeOptions{}, "[a b c]", 3, false},
		{"limit keeps count", "a", "z", core.RangeOptions{Limit: 2}, "[a b]", 3, true},
		{"limit equal to size", "a", "z", core.RangeOptions{Limit: 3}, "[a b c]", 3, false},
		{"single key", "b", "", core.RangeOptions{}, "[b]", 1, false},
		{"end before key is empty", "c", "a", core.RangeOptions{}, "[]", 0, false},
		{"sort by mod descend", "a", "z", core.RangeOptions{SortOrder: core.SortDescend, SortTarget: core.SortByMod}, "[a c b]", 3, false},
		{"non-key target with no order ascends", "a", "z", core.RangeOptions{SortTarget: core.SortByValue}, "[b c a]", 3, false},
		{"filter before limit, count ignores filter", "a", "z", core.RangeOptions{MinModRev: 3, Limit: 1}, "[a]", 3, true},
		{"max create", "a", "z", core.RangeOptions{MaxCreateRev: 2}, "[a b]", 3, false},
		{"count only", "a", "z", core.RangeOptions{CountOnly: true}, "[]", 3, false},
		{"key descend with limit", "a", "z", core.RangeOptions{SortOrder: core.SortDescend, Limit: 1}, "[c]", 3, true},
	}
	for _, c := range cases {
		var end []byte
		if c.end != "" {
			end = []byte(c.end)
		}
		r, err := core.DoRange(h.m, []byte(c.key), end, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if keys(r) != c.want || r.Count != c.count || r.More != c.more {
			t.Errorf("%s: got %s count %d more %v, want %s count %d more %v", c.name, keys(r), r.Count, r.More, c.want, c.count, c.more)
		}
	}
	r, _ := core.DoRange(h.m, []byte("a"), nil, core.RangeOptions{KeysOnly: true})
	if r.Nodes[0].Value != nil {
		t.Error("keys_only returned a value")
	}
	if n := h.node("a"); n == nil || string(n.Value) != "9" {
		t.Error("keys_only stripped the stored value")
	}
}
