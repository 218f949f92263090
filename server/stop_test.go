package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zab"
)

// waitUntil polls cond until it holds, failing the test after a long
// time (a guard against hanging, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAMemberThatFailsToApplyStopsAndSaysWhy stops one member of a
// three-member ensemble the way a failing disk would (its applies fail
// from one write on): that member reports the failure in Err and Status,
// closes Done and refuses writes with core.ErrStopped, while the other two
// go on serving.
func TestAMemberThatFailsToApplyStopsAndSaysWhy(t *testing.T) {
	net := zab.NewMemNetwork(1) // no faults: the seed picks nothing
	peers := map[uint64]string{1: "m1:1", 2: "m2:1", 3: "m3:1"}
	var armed atomic.Bool
	members := map[uint64]*Member{}
	for id := range peers {
		cfg := MemberConfig{
			DataDir: t.TempDir(), ID: id, Peers: peers, Transport: net.Endpoint(id),
			ElectionTimeout: 200 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond,
		}
		if id == 2 {
			cfg.ApplyFault = func(uint64) error {
				if armed.Load() {
					return errors.New("injected I/O failure")
				}
				return nil
			}
		}
		m, err := OpenMember(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members[id] = m
		t.Cleanup(func() { m.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitUntil(t, "every member serves", func() bool {
		for _, m := range members {
			if !m.Status().Serving() {
				return false
			}
		}
		return true
	})
	propose := func(key string) error {
		// Through a member that stays up, so the write commits.
		_, err := members[1].Propose(ctx, putOp(key, "v", 0))
		return err
	}
	if err := propose("before"); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	waitUntil(t, "a write commits with member 2 failing", func() bool { return propose("after") == nil })

	select {
	case <-members[2].Done():
	case <-ctx.Done():
		t.Fatal("member 2 did not stop")
	}
	if err := members[2].Err(); err == nil || !strings.Contains(err.Error(), "injected I/O failure") {
		t.Errorf("member 2 Err = %v, want the injected failure", err)
	}
	if st := members[2].Status(); st.Serving() || st.Err == nil {
		t.Errorf("member 2 Status: serving %v, err %v; want stopped with its failure", st.Serving(), st.Err)
	}
	if _, err := members[2].Propose(ctx, putOp("refused", "v", 0)); !errors.Is(err, core.ErrStopped) {
		t.Errorf("a write on the stopped member: %v, want core.ErrStopped", err)
	}
	for _, id := range []uint64{1, 3} {
		waitUntil(t, "the others serve on", func() bool { return members[id].Status().Serving() })
		if err := members[id].Err(); err != nil {
			t.Errorf("member %d Err = %v", id, err)
		}
	}
}
