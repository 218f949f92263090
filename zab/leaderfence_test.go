package zab

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSubmitAsLeaderIsFencedToItsEpoch: a decision only a leader may make
// enters the log on the leader of the named epoch, and nowhere else: a
// follower does not forward it and a leader of another epoch refuses it.
func TestSubmitAsLeaderIsFencedToItsEpoch(t *testing.T) {
	c := newCluster(t, 3, 1)
	c.startAll()
	l := c.leader()
	lm := c.nodes[l].m
	epoch := lm.Status().Epoch
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	for _, id := range c.ids() {
		m := c.nodes[id].m
		var try []uint32
		if id == l {
			try = []uint32{epoch + 1, epoch + 2}
		} else {
			try = []uint32{epoch} // the leader's epoch, but not its own leadership
		}
		for _, e := range try {
			p, err := m.SubmitAsLeader(ctx, e, []byte("fenced"))
			if err == nil {
				_, err = p.Wait(ctx)
			}
			if !errors.Is(err, ErrLeaderChanged) {
				t.Fatalf("member %d (leader %d, epoch %d): SubmitAsLeader(epoch %d) = %v, want ErrLeaderChanged", id, l, epoch, e, err)
			}
		}
	}
	p, err := lm.SubmitAsLeader(ctx, epoch, []byte("decided"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("leader's own SubmitAsLeader: %v", err)
	}
	if got := r.(applied).Data; got != "decided" {
		t.Fatalf("applied %q", got)
	}
	// Nothing fenced off reached the log: the one decided entry is the
	// only one.
	if got := c.converge(r.(applied).Index); len(got) != 1 || got[0] != "decided" {
		t.Fatalf("applied %q, want only the leader's own decision", got)
	}
}
