package core_test

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/core/coretest"
)

// applyGroups applies entries in groups through one Overlay per group, the
// way the store does, writing the batches only at the end of each group.
func applyGroups(t testing.TB, m *core.MemState, entries []core.Entry, groupSize func(int) int) []*core.Result {
	t.Helper()
	var results []*core.Result
	for i := 0; i < len(entries); {
		n := groupSize(i)
		if i+n > len(entries) {
			n = len(entries) - i
		}
		ov := core.NewOverlay(m)
		var batches []*core.Batch
		for j := i; j < i+n; j++ {
			res, b, err := core.Apply(ov, &entries[j])
			if err != nil {
				t.Fatalf("apply entry %d: %v", entries[j].Index, err)
			}
			results = append(results, res)
			batches = append(batches, b)
		}
		for _, b := range batches {
			m.Write(b)
		}
		i += n
	}
	return results
}

// roundTrip sends every op through its log encoding, as replication does.
func roundTrip(t testing.TB, entries []core.Entry) []core.Entry {
	out := make([]core.Entry, len(entries))
	for i, e := range entries {
		op, err := core.DecodeOp(core.EncodeOp(&e.Op))
		if err != nil {
			t.Fatalf("entry %d: decode: %v", e.Index, err)
		}
		out[i] = core.Entry{Index: e.Index, Time: e.Time, Op: *op}
	}
	return out
}

func TestApplyIsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			entries := coretest.NewGenerator(seed).Entries(1500)
			one := core.NewMemState()
			res1 := applyGroups(t, one, entries, func(int) int { return 1 })
			grouped := core.NewMemState()
			res2 := applyGroups(t, grouped, roundTrip(t, entries), func(i int) int { return 1 + (i*7)%13 })
			if one.Hash() != grouped.Hash() {
				t.Fatalf("state differs between one-by-one and grouped apply of the same log")
			}
			for i := range res1 {
				if !reflect.DeepEqual(res1[i], res2[i]) {
					t.Fatalf("entry %d: results differ between one-by-one and grouped apply:\n%+v\n%+v", i+1, res1[i], res2[i])
				}
			}
			checkInvariants(t, one)
		})
	}
}

func TestOpEncodingRoundTrips(t *testing.T) {
	g := coretest.NewGenerator(99)
	for _, e := range g.Entries(3000) {
		b := core.EncodeOp(&e.Op)
		op, err := core.DecodeOp(b)
		if err != nil {
			t.Fatalf("entry %d: %v", e.Index, err)
		}
		if !reflect.DeepEqual(*op, e.Op) {
			t.Fatalf("entry %d: round trip changed the op:\n%#v\n%#v", e.Index, e.Op, *op)
		}
	}
}

func FuzzDecodeOp(f *testing.F) {
	for _, e := range coretest.NewGenerator(5).Entries(50) {
		f.Add(core.EncodeOp(&e.Op))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := core.DecodeOp(b)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode to something that decodes the same.
		op2, err := core.DecodeOp(core.EncodeOp(op))
		if err != nil || !reflect.DeepEqual(op, op2) {
			t.Fatalf("re-encoding a decoded op changed it: %v", err)
		}
	})
}

func FuzzDecodeRecords(f *testing.F) {
	f.Add(core.AppendNode(nil, &core.Node{Key: []byte("/a"), Value: []byte("v"), ACL: []core.ACL{{Perms: 1, ID: core.ID{Scheme: "world", ID: "anyone"}}}}))
	f.Add(core.AppendDir(nil, &core.Dir{NumChildren: 2}))
	f.Add(core.AppendLease(nil, &core.Lease{ID: 7, Session: &core.Session{Password: []byte("pw")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := core.DecodeNode([]byte("k"), b)
		// The shared decoding reads the same node, and never past b.
		shared, sharedErr := core.DecodeNodeShared([]byte("k"), slices.Clip(b))
		if (err == nil) != (sharedErr == nil) || !reflect.DeepEqual(n, shared) {
			t.Fatalf("DecodeNode %+v %v, DecodeNodeShared %+v %v", n, err, shared, sharedErr)
		}
		_, _ = core.DecodeDir(b)
		_, _ = core.DecodeLease(b)
		_, _ = core.DecodeMeta(b)
	})
}

// checkInvariants verifies the tree and lease indexes agree with the nodes.
// A read that fails fails the test: an error must never pass for "absent".
func checkInvariants(t testing.TB, m *core.MemState) {
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	visible := func(p []byte) bool {
		t.Helper()
		n, _, err := core.TreeNode(m, p)
		must(fmt.Sprintf("read %q", p), err)
		return n != nil
	}
	must("range", m.Range(nil, nil, func(n *core.Node) bool {
		if n.Lease != 0 {
			found := false
			must("lease keys", m.LeaseKeys(n.Lease, func(k []byte) bool { found = found || bytes.Equal(k, n.Key); return !found }))
			if !found {
				t.Errorf("node %q has lease %d but the lease does not list it", n.Key, n.Lease)
			}
		}
		if core.IsTreePath(n.Key) && string(n.Key) != "/" {
			parent, ok := core.ParentPath(n.Key)
			if !ok {
				t.Errorf("tree node %q has no parent path", n.Key)
				return true
			}
			if !visible(parent) {
				t.Errorf("node %q has no visible parent", n.Key)
			}
			listed := false
			must("children", m.Children(parent, func(name []byte) bool { listed = listed || bytes.Equal(name, core.BaseName(n.Key)); return true }))
			if !listed {
				t.Errorf("node %q is not in its parent's child index", n.Key)
			}
		}
		return true
	}))
	must("leases", m.Leases(func(l *core.Lease) bool {
		must("lease keys", m.LeaseKeys(l.ID, func(k []byte) bool {
			n, err := m.Node(k)
			must(fmt.Sprintf("read %q", k), err)
			if n == nil || n.Lease != l.ID {
				t.Errorf("lease %d lists %q which is not attached to it", l.ID, k)
			}
			return true
		}))
		return true
	}))
	// Every listed child is visible, and counts match.
	for _, p := range collectDirs(t, m) {
		d, err := m.Dir([]byte(p))
		must(fmt.Sprintf("dir %q", p), err)
		count := int32(0)
		must("children", m.Children([]byte(p), func(name []byte) bool {
			count++
			if !visible(core.JoinPath([]byte(p), name)) {
				t.Errorf("child %q of %q is listed but not visible", name, p)
			}
			return true
		}))
		if d == nil {
			if count != 0 {
				t.Errorf("%q lists %d children but has no dir", p, count)
			}
			continue
		}
		if d.NumChildren != count {
			t.Errorf("%q: NumChildren %d, index lists %d", p, d.NumChildren, count)
		}
	}
	// A path is in its parent's child index exactly when it is in the
	// tree (the system nodes apart), so that a create can ask the index
	// alone (View.HasChild). Every path with a node or a Dir record.
	paths := m.DirPaths()
	must("range", m.Range(nil, nil, func(n *core.Node) bool { paths = append(paths, n.Key); return true }))
	for _, p := range paths {
		if !core.IsTreePath(p) || string(p) == "/" || core.IsSystemPath(p) {
			continue
		}
		parent, _ := core.ParentPath(p)
		listed, err := m.HasChild(parent, core.BaseName(p))
		must(fmt.Sprintf("child index of %q", p), err)
		if in := visible(p); listed != in {
			t.Errorf("%q: in its parent's child index %v, in the tree %v", p, listed, in)
		}
	}
}

func collectDirs(t testing.TB, m *core.MemState) []string {
	t.Helper()
	seen := map[string]bool{"/": true}
	out := []string{"/"}
	var walk func(p string)
	walk = func(p string) {
		err := m.Children([]byte(p), func(name []byte) bool {
			c := string(core.JoinPath([]byte(p), name))
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				walk(c)
			}
			return true
		})
		if err != nil {
			t.Fatalf("children of %q: %v", p, err)
		}
	}
	walk("/")
	err := m.Range(nil, nil, func(n *core.Node) bool {
		if k := string(n.Key); strings.HasPrefix(k, "/") && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
		return true
	})
	if err != nil {
		t.Fatalf("range: %v", err)
	}
	return out
}

// TestCheckInvariantsCatchesDamage damages a consistent state in each way
// checkInvariants looks for and requires it to notice: the invariant walk
// can fail.
func TestCheckInvariantsCatchesDamage(t *testing.T) {
	build := func() *core.MemState {
		m := core.NewMemState()
		applyGroups(t, m, []core.Entry{
			{Index: 1, Time: 1, Op: core.Op{LeaseGrant: &core.LeaseGrant{ID: 7, TTL: 10}}},
			{Index: 2, Time: 2, Op: core.Op{Txn: &core.Txn{Success: []core.TxnOp{
				{Kind: core.OpCreate, Key: []byte("/a"), Create: &core.CreateOptions{}},
				{Kind: core.OpCreate, Key: []byte("/a/b"), Create: &core.CreateOptions{}},
				{Kind: core.OpPut, Key: []byte("k"), Value: []byte("v"), Lease: 7},
				{Kind: core.OpPut, Key: []byte("/x/y"), Value: []byte("v")},
			}}}},
		}, func(int) int { return 1 })
		return m
	}
	checkInvariants(t, build())
	for _, tc := range []struct {
		damage string
		batch  core.Batch
		want   string
	}{
		{"a child missing from its parent's index", core.Batch{Children: []core.ChildWrite{{Parent: []byte("/a"), Name: []byte("b")}}}, "not in its parent's child index"},
		{"an implicit parent missing from its parent's index", core.Batch{Children: []core.ChildWrite{{Parent: []byte("/"), Name: []byte("x")}}}, "in its parent's child index false, in the tree true"},
		{"a child count that is off", core.Batch{Dirs: []core.DirWrite{{Path: []byte("/a"), Dir: &core.Dir{NumChildren: 2}}}}, "NumChildren"},
		{"a node whose lease does not list it", core.Batch{LeaseKeys: []core.LeaseKeyWrite{{ID: 7, Key: []byte("k")}}}, "does not list it"},
		{"a lease that lists a key not attached to it", core.Batch{LeaseKeys: []core.LeaseKeyWrite{{ID: 7, Key: []byte("other"), Present: true}}}, "not attached to it"},
	} {
		m := build()
		m.Write(&tc.batch)
		rec := &recordingTB{TB: t}
		checkInvariants(rec, m)
		if !slices.ContainsFunc(rec.errs, func(e string) bool { return strings.Contains(e, tc.want) }) {
			t.Errorf("%s: checkInvariants reported %q, want an error naming %q", tc.damage, rec.errs, tc.want)
		}
	}
}

// recordingTB records errors instead of failing the test.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
