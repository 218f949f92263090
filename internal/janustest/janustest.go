// Package janustest starts an in-process Janus member with both protocol
// faces on loopback ports, for tests in any package that need to drive one
// Janus with clientv3 and go-zookeeper at once. It is never imported by the
// server.
//
// The root package's tests start the whole binary (flags, HTTP mux); this
// helper starts only what a cross-protocol or client-side test needs, so
// packages below the root can use it without importing package main.
package janustest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi"
)

// Janus is one running member with its etcd and ZooKeeper faces.
type Janus struct {
	// EtcdAddr and ZKAddr are the faces' loopback addresses (host:port).
	EtcdAddr string
	ZKAddr   string
	Member   *server.Member
	Etcd     *etcdapi.Server
	ZK       *zkapi.Server

	close     func()
	closeOnce sync.Once
}

// Options tune the member and the faces. The zero value suits most tests.
type Options struct {
	// ZK configures the ZooKeeper face; its Logger defaults to the test's.
	ZK zkapi.Config
	// Etcd configures the etcd face; its Logger defaults to the test's.
	Etcd etcdapi.Config
	// LeaseCheckInterval is how often the lessor looks for expired leases
	// (default 20ms, so expiry tests do not wait on the check period).
	LeaseCheckInterval time.Duration
	// ExpectErrors is set by a test that makes the member log at ERROR on
	// purpose; any other ERROR record fails the test (see testlog).
	ExpectErrors bool
	// DataDir is the member's data directory (default a new t.TempDir):
	// a test that restarts a member passes the same one again.
	DataDir string
}

// Start opens a member in t.TempDir and serves both faces until the test
// ends; cleanup stops the faces, then closes the member.
func Start(t testing.TB, opts Options) *Janus {
	t.Helper()
	if opts.LeaseCheckInterval == 0 {
		opts.LeaseCheckInterval = 20 * time.Millisecond
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	var logOpts []testlog.Option
	if opts.ExpectErrors {
		logOpts = append(logOpts, testlog.ExpectErrors())
	}
	log := testlog.New(t, logOpts...)
	m, err := server.OpenMember(server.MemberConfig{DataDir: opts.DataDir, Logger: log, LeaseCheckInterval: opts.LeaseCheckInterval})
	if err != nil {
		t.Fatalf("janustest: open member: %v", err)
	}
	el, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.Close()
		t.Fatalf("janustest: listen: %v", err)
	}
	zl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		el.Close()
		m.Close()
		t.Fatalf("janustest: listen: %v", err)
	}
	if opts.ZK.Logger == nil {
		opts.ZK.Logger = log
	}
	if opts.ZK.Dirs == nil {
		opts.ZK.Dirs = m.Dirs
	}
	if opts.Etcd.Logger == nil {
		opts.Etcd.Logger = log
	}
	j := &Janus{
		EtcdAddr: el.Addr().String(),
		ZKAddr:   zl.Addr().String(),
		Member:   m,
		Etcd:     etcdapi.New(m, opts.Etcd),
		ZK:       zkapi.New(m, opts.ZK),
	}
	served := make(chan error, 2)
	go func() { served <- j.Etcd.Serve(el) }()
	go func() { served <- j.ZK.Serve(zl) }()
	j.close = func() {
		j.closeOnce.Do(func() {
			j.Etcd.Stop()
			j.ZK.Close()
			<-served
			<-served
			if err := m.Close(); err != nil {
				t.Errorf("janustest: close member: %v", err)
			}
		})
	}
	t.Cleanup(j.close)
	return j
}

// Close stops the faces and closes the member, as the end of the test
// would; a test that restarts the member on its DataDir calls it first.
func (j *Janus) Close() { j.close() }

// EtcdClient returns a clientv3 client of j's etcd face, closed when the test ends.
func (j *Janus) EtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	return EtcdClient(t, j.EtcdAddr)
}

// EtcdClient returns a clientv3 client of endpoint, closed when the test ends.
func EtcdClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("janustest: etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// ZKClient opens a go-zookeeper session with j's ZooKeeper face and waits
// until it has a session. The connection is closed when the test ends.
func (j *Janus) ZKClient(t testing.TB, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	return ZKClient(t, j.ZKAddr, timeout)
}

// ZKClient opens a go-zookeeper session with addr and waits until it has a
// session; the connection is closed when the test ends.
func ZKClient(t testing.TB, addr string, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatalf("janustest: zk connect: %v", err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c, events
			}
		case <-ctx.Done():
			t.Fatalf("janustest: no ZooKeeper session with %s", addr)
		}
	}
}
