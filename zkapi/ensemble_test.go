package zkapi_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi"
)

// janusEnsemble is n Members replicating over loopback TCP, each serving
// the ZooKeeper face: what a ZooKeeper ensemble is to its clients.
type janusEnsemble struct {
	members []*janus
}

// Addrs returns the members' ZooKeeper client addresses, by ID.
func (e *janusEnsemble) Addrs() []string {
	out := make([]string, len(e.members))
	for i, j := range e.members {
		out[i] = j.Addr
	}
	return out
}

// Leader waits until a member leads and every member follows it and has
// applied what it has committed, and returns its index. (The leader counts
// a synchronized follower as connected, which a reconfig needs, only from
// its next tick: see changeReconfig.)
func (e *janusEnsemble) Leader(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		for i, j := range e.members {
			st := j.Member.Status()
			if st.LeaderID != st.MemberID {
				continue
			}
			synced := true
			for _, o := range e.members {
				if os := o.Member.Status(); os.LeaderID != st.LeaderID || os.AppliedIndex < st.CommitIndex {
					synced = false
				}
			}
			if synced {
				return i
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("no member of the ensemble leads")
	return -1
}

// startJanusEnsemble starts n voting members with the ZooKeeper face
// configured as cfg, and waits for a leader.
func startJanusEnsemble(t testing.TB, n int, cfg zkapi.Config) *janusEnsemble {
	t.Helper()
	ports := testenv.FreePorts(t, 2*n)
	peers, clients := map[uint64]string{}, map[uint64]server.ClientAddrs{}
	for i := range n {
		id := uint64(i + 1)
		peers[id] = fmt.Sprintf("127.0.0.1:%d", ports[2*i])
		clients[id] = server.ClientAddrs{ZKAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
	}
	e := &janusEnsemble{}
	for i := range n {
		id := uint64(i + 1)
		log := testlog.New(t).With("member", id)
		m, err := server.OpenMember(server.MemberConfig{
			DataDir: t.TempDir(), ID: id, Logger: log, Name: fmt.Sprintf("m%d", id),
			ZKAddr: clients[id].ZKAddr, Peers: peers, Clients: clients,
			ElectionTimeout: 500 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
			LeaseCheckInterval: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("open member %d: %v", id, err)
		}
		c := cfg
		c.Logger, c.Dirs = log, m.Dirs
		s := zkapi.New(m, c)
		l, err := net.Listen("tcp", clients[id].ZKAddr)
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Serve(l) }()
		t.Cleanup(func() {
			s.Close()
			<-done
			if err := m.Close(); err != nil {
				t.Errorf("close member %d: %v", id, err)
			}
		})
		e.members = append(e.members, &janus{Addr: clients[id].ZKAddr, Member: m, Server: s})
	}
	e.Leader(t)
	return e
}
