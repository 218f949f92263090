package zab

import (
	"bytes"
	"context"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"
)

func sampleMessages() []Message {
	return []Message{
		{Type: MsgNotification, State: stateLooking, Round: 7, Leader: 3, Zxid: MakeZxid(2, 9), Epoch: 2},
		{Type: MsgAck, Epoch: 1 << 31, Seq: 4, Index: 1 << 40},
		{Type: MsgSync, Flags: FlagSnap | FlagTrunc, Epoch: 5, Nonce: 99, Index: 10, Zxid: 12, Commit: 9, Data: []byte("snapshot"),
			Entries: []Entry{{Index: 11, Zxid: MakeZxid(5, 1), Time: -3, Origin: 2, ReqID: 1 << 63, Data: []byte("a")}, {Index: 12, Zxid: MakeZxid(5, 2)}}},
		{Type: MsgCallResp, Nonce: 1, Err: "handler says no"},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b := AppendMessage(nil, &m)
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("%v: %v", m.Type, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("decoded %+v, want %+v", got, m)
		}
		for cut := 0; cut < len(b); cut++ {
			if _, err := DecodeMessage(b[:cut]); !errors.Is(err, ErrBadMessage) {
				t.Fatalf("%v cut at %d: %v", m.Type, cut, err)
			}
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(AppendMessage(nil, &m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		again, err := DecodeMessage(AppendMessage(nil, &m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoding %+v: %+v, %v", m, again, err)
		}
	})
}

func listenAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func recvT(t *testing.T, tr Transport) Envelope {
	t.Helper()
	select {
	case env := <-tr.Receive():
		return env
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
	return Envelope{}
}

// The TCP transport delivers in order, survives a peer restart, and a
// malformed frame closes only the connection that carried it.
func TestTCPTransport(t *testing.T) {
	peers := map[uint64]string{1: listenAddr(t), 2: listenAddr(t)}
	a, err := NewTCPTransport(TCPConfig{ID: 1, Listen: peers[1], Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewTCPTransport(TCPConfig{ID: 2, Listen: peers[2], Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		a.Send(2, Message{Type: MsgAck, Index: uint64(i)})
	}
	for i := range 100 {
		env := recvT(t, b)
		if env.From != 1 || env.Msg.Index != uint64(i) {
			t.Fatalf("message %d: %+v", i, env)
		}
	}
	// Garbage on a fresh connection: that connection is closed, the
	// transport keeps working.
	c, err := net.Dial("tcp", peers[2])
	if err != nil {
		t.Fatal(err)
	}
	c.Write(appendFrame(nil, append([]byte(helloMagic), 1)))
	c.Write(appendFrame(nil, []byte("not a message")))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection with a malformed frame stayed open")
	}
	c.Close()
	a.Send(2, Message{Type: MsgCommit, Commit: 7})
	if env := recvT(t, b); env.Msg.Commit != 7 {
		t.Fatalf("after a bad connection: %+v", env)
	}
	// Restart b: a redials and delivers again.
	b.Close()
	b, err = NewTCPTransport(TCPConfig{ID: 2, Listen: peers[2], Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		a.Send(2, Message{Type: MsgHeartbeat, Nonce: 1})
		select {
		case env := <-b.Receive():
			if env.Msg.Type != MsgHeartbeat {
				t.Fatalf("got %+v", env)
			}
			return
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no delivery after the peer restarted")
		}
	}
}

// Three members over real TCP elect a leader and replicate.
func TestTCPCluster(t *testing.T) {
	lns := map[uint64]net.Listener{}
	peers := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id], peers[id] = ln, ln.Addr().String()
	}
	var ms []*Member
	for id := uint64(1); id <= 3; id++ {
		tr, err := NewTCPTransport(TCPConfig{ID: id, Listen: peers[id], Listener: lns[id], Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() }) // after the member's Close (cleanups run last first)
		ms = append(ms, openT(t, Config{Dir: t.TempDir(), ID: id, Peers: peers, Transport: tr,
			ElectionTimeout: 300 * time.Millisecond, HeartbeatInterval: 30 * time.Millisecond}, &replSM{}))
	}
	// Until the members have elected a leader a proposal fails with "no
	// leader" (or times out waiting for one); any other error is a failure.
	var got applied
	eventually(t, "a write through TCP", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := ms[2].Propose(ctx, []byte("over tcp"))
		if err != nil {
			if !retryable(err) {
				t.Fatalf("propose over TCP: %v", err)
			}
			return false
		}
		got = v.(applied)
		return true
	})
	for _, m := range ms {
		if err := m.WaitApplied(context.Background(), got.Index); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal([]byte(got.Data), []byte("over tcp")) {
		t.Fatalf("got %+v", got)
	}
}
