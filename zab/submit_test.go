package zab

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// Proposals one goroutine submits without waiting commit in submission
// order, on a single member and when a follower forwards them.
func TestSubmittedProposalsCommitInOrder(t *testing.T) {
	const n = 200
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("p%03d", i)
	}
	submitAll := func(t *testing.T, m *Member) {
		t.Helper()
		ctx := context.Background()
		pending := make([]*Pending, 0, n)
		for _, d := range want {
			p, err := m.Submit(ctx, []byte(d))
			if err != nil {
				t.Fatalf("submit %s: %v", d, err)
			}
			pending = append(pending, p)
		}
		for i, p := range pending {
			v, err := p.Wait(ctx)
			if err != nil {
				t.Fatalf("wait %s: %v", want[i], err)
			}
			if got := v.(applied).Data; got != want[i] {
				t.Fatalf("proposal %d answered with %q", i, got)
			}
		}
	}

	t.Run("single member", func(t *testing.T) {
		sm := &memSM{}
		m := openT(t, Config{Dir: t.TempDir()}, sm)
		defer closeT(t, m)
		submitAll(t, m)
		var got []string
		for _, e := range sm.snapshot() {
			got = append(got, string(e.Data))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("applied %q, want %q", got, want)
		}
	})

	t.Run("forwarded by a follower", func(t *testing.T) {
		c := newCluster(t, 3, 0)
		c.startAll()
		f := c.followerOf(c.leader())
		submitAll(t, c.nodes[f].m)
		got := c.converge(n)
		if !slices.Equal(got, want) {
			t.Fatalf("history %q, want %q", got, want)
		}
	})
}
