package testenv

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// EtcdCluster is a real etcd cluster of embedded members, each on its own
// loopback client and peer ports: the reference for membership changes.
type EtcdCluster struct {
	// Endpoints are the members' client URLs, in member order.
	Endpoints []string
	// PeerURLs are the members' peer URLs, in member order.
	PeerURLs []string
	// Members are the embedded servers, in member order.
	Members []*embed.Etcd

	stops []func()
}

// Stop stops member i (0-based) as a crash would look to the others; the
// end of the test does not stop it again.
func (c *EtcdCluster) Stop(i int) { c.stops[i]() }

// StartEtcdCluster starts an etcd cluster of n voting members named
// <prefix>-1 to <prefix>-n and waits until every one serves clients.
func StartEtcdCluster(t testing.TB, prefix string, n int) *EtcdCluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	c := &EtcdCluster{}
	var initial []string
	for i := range n {
		c.Endpoints = append(c.Endpoints, "http://127.0.0.1:"+strconv.Itoa(ports[2*i]))
		c.PeerURLs = append(c.PeerURLs, "http://127.0.0.1:"+strconv.Itoa(ports[2*i+1]))
		initial = append(initial, fmt.Sprintf("%s-%d=%s", prefix, i+1, c.PeerURLs[i]))
	}
	// The members wait for each other: start them all, then wait for all.
	for i := range n {
		e, stop := startEtcdMember(t, fmt.Sprintf("%s-%d", prefix, i+1), c.Endpoints[i], c.PeerURLs[i], strings.Join(initial, ","), embed.ClusterStateFlagNew)
		c.Members = append(c.Members, e)
		c.stops = append(c.stops, stop)
	}
	for i, e := range c.Members {
		waitEtcdReady(t, e, fmt.Sprintf("%s-%d", prefix, i+1))
	}
	return c
}

// StartEtcdJoiner starts a member that joins an existing cluster after a
// MemberAdd named it: name and peerURL as added, initialCluster as
// `etcdctl member add` printed it (ETCD_INITIAL_CLUSTER). It waits until
// the member serves clients and returns it with its client URL.
func StartEtcdJoiner(t testing.TB, name, peerURL, initialCluster string) (*embed.Etcd, string) {
	t.Helper()
	clientURL := "http://127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	e, _ := startEtcdMember(t, name, clientURL, peerURL, initialCluster, embed.ClusterStateFlagExisting)
	waitEtcdReady(t, e, name)
	return e, clientURL
}

// startEtcdMember starts a member and returns it with a function that
// stops it once; the end of the test calls it too.
func startEtcdMember(t testing.TB, name, clientURL, peerURL, initial, state string) (*embed.Etcd, func()) {
	t.Helper()
	cu, err := url.Parse(clientURL)
	if err != nil {
		t.Fatalf("testenv: client URL %q: %v", clientURL, err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		t.Fatalf("testenv: peer URL %q: %v", peerURL, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = t.TempDir()
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = initial
	cfg.ClusterState = state
	cfg.InitialClusterToken = "janus-reference"
	logPath := filepath.Join(t.TempDir(), name+".log")
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{logPath}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("testenv: start embedded etcd %s: %v", name, err)
	}
	stop := sync.OnceFunc(e.Close)
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("testenv: log of embedded etcd %s (%s):\n%s", name, logPath, readTail(logPath, 100))
		}
	})
	return e, stop
}

func waitEtcdReady(t testing.TB, e *embed.Etcd, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("testenv: embedded etcd %s failed before ready: %v", name, err)
	case <-ctx.Done():
		t.Fatalf("testenv: embedded etcd %s not ready: %v", name, ctx.Err())
	}
}
