package zkapi_test

import (
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi"
)

// janus is one Member with the ZooKeeper face on a loopback port.
type janus struct {
	Addr   string
	Member *server.Member
	Server *zkapi.Server
}

func startJanus(t testing.TB, cfg zkapi.Config) *janus {
	t.Helper()
	return startJanusOn(t, cfg, func(m *server.Member) core.Backend { return m })
}

// startJanusOn starts a member and serves the ZooKeeper face on
// wrap(member), so a test can stand between the face and the member.
func startJanusOn(t testing.TB, cfg zkapi.Config, wrap func(*server.Member) core.Backend) *janus {
	t.Helper()
	log := testlog.New(t)
	m, err := server.OpenMember(server.MemberConfig{DataDir: t.TempDir(), Logger: log, LeaseCheckInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("open member: %v", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	if cfg.Dirs == nil {
		cfg.Dirs = m.Dirs
	}
	s := zkapi.New(wrap(m), cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		<-done
		if err := m.Close(); err != nil {
			t.Errorf("close member: %v", err)
		}
	})
	return &janus{Addr: l.Addr().String(), Member: m, Server: s}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// connect opens a go-zookeeper session and waits until it is established.
func connect(t testing.TB, addr string, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c, events
			}
		case <-deadline:
			t.Fatalf("no session with %s", addr)
		}
	}
}

// waitEvent returns the next event of a watch channel or fails.
func waitEvent(t testing.TB, ch <-chan zk.Event) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event")
		return zk.Event{}
	}
}
