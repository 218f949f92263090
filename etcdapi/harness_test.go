package etcdapi_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
)

// janus is one member serving the etcd API on loopback ports.
type janus struct {
	Endpoint string // gRPC, as a client URL
	Gateway  string // JSON gateway base URL
	Client   *clientv3.Client
	Server   *etcdapi.Server
	Member   *server.Member
}

type janusOption func(*server.MemberConfig, *etcdapi.Config)

func startJanus(t testing.TB, opts ...janusOption) *janus {
	t.Helper()
	logger := testlog.New(t)
	mcfg := server.MemberConfig{DataDir: t.TempDir(), Logger: logger}
	acfg := etcdapi.Config{Logger: logger}
	for _, o := range opts {
		o(&mcfg, &acfg)
	}
	m, err := server.OpenMember(mcfg)
	if err != nil {
		t.Fatalf("open member: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close member: %v", err)
		}
	})
	srv := etcdapi.New(m, acfg)
	t.Cleanup(srv.Stop)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.GatewayHandler()}
	go hs.Serve(gl)
	t.Cleanup(func() { hs.Close() })

	j := &janus{Endpoint: "http://" + l.Addr().String(), Gateway: "http://" + gl.Addr().String(), Server: srv, Member: m}
	j.Client = newClient(t, j.Endpoint)
	return j
}

func newClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
