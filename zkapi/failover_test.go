package zkapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// leaderless stands between the ZooKeeper face and a member and makes
// lease renewals fail as they do on a member whose ensemble is electing:
// with core.ErrNoLeader, saying nothing about the lease.
type leaderless struct {
	core.Backend
	down  atomic.Bool
	fails atomic.Int32 // renewals still to fail, besides while down
}

func (b *leaderless) Leases() core.Lessor { return leaderlessLeases{b.Backend.Leases(), b} }

type leaderlessLeases struct {
	core.Lessor
	b *leaderless
}

func (l leaderlessLeases) KeepAlive(ctx context.Context, id int64) (int64, error) {
	if l.b.down.Load() || l.b.fails.Add(-1) >= 0 {
		return 0, fmt.Errorf("lease call to the leader: %w", core.ErrNoLeader)
	}
	return l.Lessor.KeepAlive(ctx, id)
}

// closedWithoutReply reports whether the server closed the connection
// without answering.
func (r *rawClient) closedWithoutReply() bool {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := jute.ReadFrame(r.br, 1<<22)
	return errors.Is(err, io.EOF)
}

// TestSessionOutlivesAMemberWithoutALeader: while no leader can renew a
// session, re-attaching is not answered "expired" (the connection closes
// without a reply, or waits for a leader), pings on an attached
// connection are still answered, and once a leader is back the same
// session re-attaches. A wrong password is still refused as ZooKeeper
// refuses it.
func TestSessionOutlivesAMemberWithoutALeader(t *testing.T) {
	var b *leaderless
	j := startJanusOn(t, zkapi.Config{TickTime: 200 * time.Millisecond}, func(m *server.Member) core.Backend {
		b = &leaderless{Backend: m}
		return b
	})
	first := dialRaw(t, j.Addr)
	sess := first.handshake(jute.ConnectRequest{TimeOut: 4000})
	if sess.SessionID == 0 || sess.TimeOut != 4000 {
		t.Fatalf("connect response %+v", sess)
	}

	b.down.Store(true)
	if h := first.call(jute.OpPing, nil, nil); h.Err != jute.CodeOk {
		t.Fatalf("ping without a leader: %v", h.Err)
	}
	again := dialRaw(t, j.Addr)
	again.write(&jute.ConnectRequest{TimeOut: 4000, SessionID: sess.SessionID, Passwd: sess.Passwd})
	if !again.closedWithoutReply() {
		t.Fatal("re-attach without a leader was answered; want the connection closed without a reply")
	}
	wrong := dialRaw(t, j.Addr)
	bad := append([]byte(nil), sess.Passwd...)
	bad[0] ^= 1
	if r := wrong.handshake(jute.ConnectRequest{TimeOut: 4000, SessionID: sess.SessionID, Passwd: bad}); r.TimeOut != 0 {
		t.Errorf("wrong password without a leader: %+v, want the expired answer", r)
	}

	// The leader comes back while a re-attach waits for it.
	b.down.Store(false)
	b.fails.Store(2)
	back := dialRaw(t, j.Addr)
	if r := back.handshake(jute.ConnectRequest{TimeOut: 4000, SessionID: sess.SessionID, Passwd: sess.Passwd}); r.SessionID != sess.SessionID || r.TimeOut != 4000 {
		t.Fatalf("re-attach once a leader is back: %+v", r)
	}
	if h := back.call(jute.OpPing, nil, nil); h.Err != jute.CodeOk {
		t.Fatalf("ping on the re-attached session: %v", h.Err)
	}
}

// TestConnectionWithoutALeaderClosesWithoutExpiry: a connection whose
// session no renewal can reach a leader for is answered while that is
// recent and then closed, so the client moves to another member, without
// ever being told the session expired; the session then re-attaches.
func TestConnectionWithoutALeaderClosesWithoutExpiry(t *testing.T) {
	var b *leaderless
	j := startJanusOn(t, zkapi.Config{TickTime: 200 * time.Millisecond}, func(m *server.Member) core.Backend {
		b = &leaderless{Backend: m}
		return b
	})
	c := dialRaw(t, j.Addr)
	// The member's own lessor still counts the session down (only the
	// renewals fail), so the re-attach at the end has the other half of
	// the timeout to come in.
	sess := c.handshake(jute.ConnectRequest{TimeOut: 4000})
	b.down.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for pings := 0; ; pings++ {
		if time.Now().After(deadline) {
			t.Fatalf("the connection was never closed after %d pings without a leader", pings)
		}
		c.write(&jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
		c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		frame, err := jute.ReadFrame(c.br, 1<<22)
		if errors.Is(err, io.EOF) {
			t.Logf("closed after %d answered pings", pings)
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var h jute.ReplyHeader
		if err := jute.Unmarshal(frame, &h); err != nil {
			t.Fatal(err)
		}
		if h.Err != jute.CodeOk {
			t.Fatalf("ping without a leader answered %v", h.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.down.Store(false)
	back := dialRaw(t, j.Addr)
	if r := back.handshake(jute.ConnectRequest{TimeOut: 4000, SessionID: sess.SessionID, Passwd: sess.Passwd}); r.SessionID != sess.SessionID || r.TimeOut != 4000 {
		t.Fatalf("re-attach once a leader is back: %+v", r)
	}
}
