package zab

import "testing"

// TestTCPTransportFollowsPeers changes a transport's peers as the driver
// does when the configuration changes: a member added is dialed and its
// connections accepted, and a member removed is sent what was queued for
// it before it left (the COMMIT that removes it), then nothing more.
func TestTCPTransportFollowsPeers(t *testing.T) {
	old := map[uint64]string{1: listenAddr(t), 2: listenAddr(t)}
	grown := map[uint64]string{1: old[1], 2: old[2], 3: listenAddr(t)}
	newT := func(id uint64, peers map[uint64]string) *TCPTransport {
		tr, err := NewTCPTransport(TCPConfig{ID: id, Listen: peers[id], Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	a, c := newT(1, old), newT(3, grown)

	a.SetPeers(grown)
	a.Send(3, Message{Type: MsgAck, Index: 1})
	if env := recvT(t, c); env.From != 1 || env.Msg.Index != 1 {
		t.Fatalf("added peer got %+v", env)
	}
	c.Send(1, Message{Type: MsgAck, Index: 2})
	if env := recvT(t, a); env.From != 3 || env.Msg.Index != 2 {
		t.Fatalf("from the added peer: %+v", env)
	}

	for i := range 50 {
		a.Send(3, Message{Type: MsgCommit, Commit: uint64(10 + i)})
	}
	a.SetPeers(old)
	for i := range 50 {
		if env := recvT(t, c); env.Msg.Commit != uint64(10+i) {
			t.Fatalf("message %d queued before the peer left: %+v", i, env)
		}
	}
	a.pmu.RLock()
	left := a.peers[3] == nil
	a.pmu.RUnlock()
	if !left {
		t.Fatal("the removed peer still has a sender")
	}

	// The member removed still reaches a, and a answers it (a member that
	// missed the COMMIT removing it learns of it from such answers),
	// through a sender that stops again once it has sent them.
	c.Send(1, Message{Type: MsgNotification, Round: 7})
	if env := recvT(t, a); env.From != 3 || env.Msg.Round != 7 {
		t.Fatalf("from the removed peer: %+v", env)
	}
	a.Send(3, Message{Type: MsgNotification, Round: 8})
	if env := recvT(t, c); env.From != 1 || env.Msg.Round != 8 {
		t.Fatalf("answer to the removed peer: %+v", env)
	}
	a.pmu.RLock()
	left = a.peers[3] == nil
	a.pmu.RUnlock()
	if !left {
		t.Fatal("answering the removed peer made it a peer again")
	}
}
