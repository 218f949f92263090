package zab

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"
)

// sampleConf is a configuration as a SYNC or a notification carries it.
func sampleConf(t testing.TB) *Membership {
	m, err := NewMembership([]uint64{1, 2, 5}, []uint64{4})
	if err != nil {
		t.Fatal(err)
	}
	m.Version, m.Index, m.Time = MakeZxid(3, 7), 40, 1_764_662_400_123
	return &m
}

func sampleMessages(t testing.TB) []Message {
	return []Message{
		{Type: MsgNotification, State: stateLooking, Round: 7, Leader: 3, Zxid: MakeZxid(2, 9), Epoch: 2},
		{Type: MsgAck, Epoch: 1 << 31, Seq: 4, Index: 1 << 40},
		{Type: MsgSync, Flags: FlagSnap | FlagTrunc, Epoch: 5, Nonce: 99, Index: 10, Zxid: 12, Commit: 9, Data: []byte("snapshot"),
			Entries: []Entry{{Index: 11, Zxid: MakeZxid(5, 1), Time: -3, Origin: 2, ReqID: 1 << 63, Data: []byte("a")}, {Index: 12, Zxid: MakeZxid(5, 2)}}},
		{Type: MsgCallResp, Nonce: 1, Err: "handler says no"},
		{Type: MsgFollowerInfo, Flags: FlagObserver | FlagReadsV2, Epoch: 3, Zxid: MakeZxid(3, 1), Index: 4, Nonce: 8},
		// Version 2: a configuration entry, a configuration.
		{Type: MsgProposal, Epoch: 3, Entries: []Entry{
			{Index: 40, Zxid: MakeZxid(3, 7), Time: 5, Origin: 1, ReqID: 2, Kind: EntryMembership, Data: EncodeMembership(*sampleConf(t))},
			{Index: 41, Zxid: MakeZxid(3, 8), Time: 6, Data: []byte("b")}}},
		{Type: MsgSync, Epoch: 4, Nonce: 3, Index: 41, Zxid: MakeZxid(3, 8), Commit: 41, Membership: sampleConf(t)},
		{Type: MsgNotification, State: stateFollowing, Round: 2, Leader: 5, Zxid: MakeZxid(3, 8), Epoch: 3, Membership: sampleConf(t)},
	}
}

// sameMessage reports whether a decoded message is m. Configurations are
// compared by their encoding: how an empty list or map reads back is not
// the wire's business.
func sameMessage(got, m Message) bool {
	gm, mm := got.Membership, m.Membership
	got.Membership, m.Membership = nil, nil
	if !reflect.DeepEqual(got, m) || (gm == nil) != (mm == nil) {
		return false
	}
	return gm == nil || (gm.Version == mm.Version && gm.Index == mm.Index && bytes.Equal(EncodeMembership(*gm), EncodeMembership(*mm)))
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range sampleMessages(t) {
		b := AppendMessage(nil, &m)
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("%v: %v", m.Type, err)
		}
		if !sameMessage(got, m) {
			t.Fatalf("decoded %+v, want %+v", got, m)
		}
		for cut := 0; cut < len(b); cut++ {
			if _, err := DecodeMessage(b[:cut]); !errors.Is(err, ErrBadMessage) {
				t.Fatalf("%v cut at %d: %v", m.Type, cut, err)
			}
		}
	}
}

// A message is encoded in version 1, which a member of the last version
// reads, unless it carries a configuration entry or a configuration; the
// starting configuration is left out.
func TestMessageVersion(t *testing.T) {
	start, err := NewMembership([]uint64{1, 2, 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		m       Message
		version byte
	}{
		{"heartbeat", Message{Type: MsgHeartbeat, Epoch: 2, Commit: 5}, 1},
		{"data entries", Message{Type: MsgProposal, Entries: []Entry{{Index: 1, Zxid: 1, Data: []byte("x")}}}, 1},
		{"SYNC with the starting configuration", Message{Type: MsgSync, Index: 3, Membership: &start}, 1},
		{"configuration entry", Message{Type: MsgProposal, Entries: []Entry{{Index: 1, Zxid: 1, Kind: EntryMembership, Data: EncodeMembership(start)}}}, 2},
		{"SYNC with a later configuration", Message{Type: MsgSync, Membership: sampleConf(t)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendMessage(nil, &tt.m)
			if b[0] != tt.version {
				t.Fatalf("encoded in version %d, want %d", b[0], tt.version)
			}
			got, err := DecodeMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.m
			if want.Membership != nil && want.Membership.Version == 0 {
				want.Membership = nil
			}
			if !sameMessage(got, want) {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
		})
	}
}

// A version-1 frame, as the last version writes it, still decodes (a
// rolling upgrade mixes versions); frames of a later version, or version-2
// frames this binary would never write, are malformed.
func TestMessageOlderAndLaterVersions(t *testing.T) {
	// A SYNC with a snapshot and one entry, encoded by the version-1 codec.
	v1, _ := hex.DecodeString("0105040005000080808080500a09006300000004736e6170010b81808080500502070161")
	got, err := DecodeMessage(v1)
	if err != nil {
		t.Fatalf("a version-1 frame: %v", err)
	}
	want := Message{Type: MsgSync, Flags: FlagSnap, Epoch: 5, Nonce: 99, Index: 10, Zxid: MakeZxid(5, 0), Commit: 9, Data: []byte("snap"),
		Entries: []Entry{{Index: 11, Zxid: MakeZxid(5, 1), Time: -3, Origin: 2, ReqID: 7, Data: []byte("a")}}}
	if !sameMessage(got, want) {
		t.Fatalf("the version-1 frame decoded as %+v, want %+v", got, want)
	}
	if again := AppendMessage(nil, &got); !bytes.Equal(again, v1) {
		t.Fatalf("re-encoded as %x, want the same version-1 bytes %x", again, v1)
	}

	// frame is a version-2 SYNC with every numeric field 0 and no Err or
	// Data, followed by tail (entries and configuration).
	frame := func(tail ...byte) []byte {
		return append([]byte{messageVersion, byte(MsgSync), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, tail...)
	}
	if _, err := DecodeMessage(frame(0, 0)); err != nil {
		t.Fatalf("the frame the cases below change does not decode: %v", err)
	}
	conf := EncodeMembership(*sampleConf(t))
	later := frame(0, 0)
	later[0] = messageVersion + 1
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"later version", later},
		{"bad configuration marker", frame(0, 2)},
		{"starting configuration", frame(append([]byte{0, 1, 0, 0, byte(len(conf))}, conf...)...)},
		{"configuration without an index", frame(append([]byte{0, 1, 5, 0, byte(len(conf))}, conf...)...)},
		{"configuration without voters", frame(0, 1, 5, 5, 2, 0, 0)},
		{"configuration cut short", frame(append([]byte{0, 1, 5, 5, byte(len(conf) - 1)}, conf[:len(conf)-1]...)...)},
		{"entry of unknown kind", frame(1, 1, 1, 0, 0, 0, byte(entryKindEnd), 0, 0)},
	} {
		_, err := DecodeMessage(tt.b)
		if !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s (%x): %v, want ErrBadMessage", tt.name, tt.b, err)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, m := range sampleMessages(f) {
		f.Add(AppendMessage(nil, &m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		again, err := DecodeMessage(AppendMessage(nil, &m))
		if err != nil || !sameMessage(again, m) {
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
