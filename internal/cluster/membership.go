package cluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/testenv"
)

// Membership changes go through the real etcdctl, as an operator makes
// them: member add (--learner), promote, remove, list and move-leader.
// A new member is laid out by NewNode, added by the ensemble, then started
// by Join with --initial-cluster-state existing on an empty data dir.

// NewNode lays out a node the ensemble does not know yet: its addresses
// and data dir, no ID and no process. Add it (MemberAdd), then start it
// with Join.
func (c *Cluster) NewNode() *Node {
	c.t.Helper()
	c.added++
	return c.newNode(fmt.Sprintf("joined%d", c.added), freePorts(c.t, 4))
}

// Join starts n, which the ensemble has just added as member id, with
// --initial-cluster-state existing on an empty data dir, and waits until it
// answers /health. idFlag is --id as the operator passes it (the ID
// etcdctl printed, with 0x in front). voters and observers are the new
// configuration, n among them, as etcdctl member add's
// ETCD_INITIAL_CLUSTER lists it: the joining member takes only their
// addresses, to find the ensemble. n becomes the last of c.Nodes; Join
// returns its index.
func (c *Cluster) Join(n *Node, id uint64, idFlag string, voters, observers []*Node) (int, error) {
	n.ID, n.idFlag = id, idFlag
	list := func(nodes []*Node, addr func(*Node) string) string {
		var parts []string
		for _, m := range nodes {
			parts = append(parts, fmt.Sprintf("%d=%s", m.ID, addr(m)))
		}
		return strings.Join(parts, ",")
	}
	all := append(slices.Clone(voters), observers...)
	n.ensemble = []string{
		"--initial-cluster-state", "existing",
		"--peers", list(voters, func(m *Node) string { return m.PeerAddr }),
		"--peer-etcd", list(all, func(m *Node) string { return m.EtcdAddr }),
		"--peer-zk", list(all, func(m *Node) string { return m.ZKAddr }),
	}
	if len(observers) > 0 {
		n.ensemble = append(n.ensemble, "--observers", list(observers, func(m *Node) string { return m.PeerAddr }))
	}
	c.Nodes = append(c.Nodes, n)
	if err := c.spawn(n); err != nil {
		return -1, err
	}
	return len(c.Nodes) - 1, c.waitReady(n)
}

// JoinZooCfg starts n as ZooKeeper's procedure starts a new server: from a
// zoo.cfg whose dynamicConfigFile holds the running ensemble's lines (what
// zkCli.sh config prints, given here as config) plus n's own server line,
// the file named after the configuration's version as ZooKeeper names it
// (zoo.cfg.dynamic.<version>), with myid in its dataDir and no other
// state. Janus then joins as --initial-cluster-state existing would. It waits until n
// answers /health; n becomes the last of c.Nodes and JoinZooCfg returns
// its index.
func (c *Cluster) JoinZooCfg(n *Node, id uint64, config string, observer bool) (int, error) {
	n.ID = id
	role := "participant"
	if observer {
		role = "observer"
	}
	// The election port is never dialled: Janus elects over the peer port.
	self := fmt.Sprintf("server.%d=%s:3888:%s;%s", id, n.PeerAddr, role, n.ZKAddr)
	lines := []string{self}
	version := ""
	for _, l := range strings.Split(strings.TrimSpace(config), "\n") {
		if v, ok := strings.CutPrefix(l, "version="); ok {
			version = v
			continue
		}
		lines = append(lines, l)
	}
	if version == "" {
		return -1, fmt.Errorf("cluster: configuration without version=: %q", config)
	}
	dynName := "zoo.cfg.dynamic." + version
	dir := n.DataDir + "-conf"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, fmt.Errorf("cluster: zoo.cfg dir: %w", err)
	}
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		return -1, fmt.Errorf("cluster: data dir: %w", err)
	}
	files := map[string]string{
		filepath.Join(n.DataDir, "myid"): fmt.Sprintf("%d\n", id),
		filepath.Join(dir, dynName):      strings.Join(lines, "\n") + "\n",
		filepath.Join(dir, "zoo.cfg"):    fmt.Sprintf("dataDir=%s\ndynamicConfigFile=%s\n", n.DataDir, filepath.Join(dir, dynName)),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return -1, fmt.Errorf("cluster: %w", err)
		}
	}
	n.ensemble = []string{"--zk-config", filepath.Join(dir, "zoo.cfg")}
	c.Nodes = append(c.Nodes, n)
	if err := c.spawn(n); err != nil {
		return -1, err
	}
	return len(c.Nodes) - 1, c.waitReady(n)
}

// RunningEtcdEndpoints returns the etcd addresses of the nodes whose
// process runs.
func (c *Cluster) RunningEtcdEndpoints() []string {
	var out []string
	for i, n := range c.Nodes {
		if c.Running(i) {
			out = append(out, n.EtcdAddr)
		}
	}
	return out
}

// Etcdctl runs the real etcdctl with args against every running node and
// returns its standard output; an error carries its standard error. Call
// it from the test's goroutine (locating etcdctl may fail the test).
func (c *Cluster) Etcdctl(ctx context.Context, args ...string) (string, error) {
	c.t.Helper()
	return c.EtcdctlAt(ctx, c.RunningEtcdEndpoints(), args...)
}

// EtcdctlAt is Etcdctl against the given etcd endpoints only.
func (c *Cluster) EtcdctlAt(ctx context.Context, endpoints []string, args ...string) (string, error) {
	c.t.Helper()
	c.etcdctlOnce.Do(func() { c.etcdctl = testenv.EtcdctlPath(c.t) })
	full := append([]string{"--endpoints", strings.Join(endpoints, ","), "--command-timeout", "10s"}, args...)
	cmd := exec.CommandContext(ctx, c.etcdctl, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("etcdctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// memberAdded is etcdctl member add's first line: the new member's ID in
// hexadecimal, padded to 16 characters with spaces.
var memberAdded = regexp.MustCompile(`Member\s+([0-9a-f]+) added (?:as learner )?to cluster`)

// MemberAdd adds n to the ensemble with etcdctl member add (--learner if
// learner) under the given name, and returns the ID etcdctl printed, as
// etcdctl printed it (hexadecimal, no 0x) and as a number.
func (c *Cluster) MemberAdd(ctx context.Context, n *Node, name string, learner bool) (string, uint64, error) {
	c.t.Helper()
	args := []string{"member", "add", name, "--peer-urls", "http://" + n.PeerAddr}
	if learner {
		args = append(args, "--learner")
	}
	out, err := c.Etcdctl(ctx, args...)
	if err != nil {
		return "", 0, err
	}
	m := memberAdded.FindStringSubmatch(out)
	if m == nil {
		return "", 0, fmt.Errorf("etcdctl member add printed no member ID:\n%s", out)
	}
	id, err := strconv.ParseUint(m[1], 16, 64)
	if err != nil {
		return "", 0, fmt.Errorf("etcdctl member add printed ID %q: %w", m[1], err)
	}
	return m[1], id, nil
}

// ListedMember is one member as etcdctl member list -w json shows it.
type ListedMember struct {
	ID         uint64   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

// MemberList returns the members etcdctl member list shows, sorted by ID,
// asking the given endpoints (none: every running node). Without
// --consistency=s etcdctl asks for a linearizable list.
func (c *Cluster) MemberList(ctx context.Context, endpoints ...string) ([]ListedMember, error) {
	c.t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.RunningEtcdEndpoints()
	}
	out, err := c.EtcdctlAt(ctx, endpoints, "member", "list", "-w", "json")
	if err != nil {
		return nil, err
	}
	var resp struct {
		Members []ListedMember `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		return nil, fmt.Errorf("etcdctl member list -w json: %w:\n%s", err, out)
	}
	slices.SortFunc(resp.Members, func(a, b ListedMember) int { return cmp.Compare(a.ID, b.ID) })
	return resp.Members, nil
}

// hexID is a member ID as etcdctl takes it on its command line.
func hexID(id uint64) string { return strconv.FormatUint(id, 16) }

// CaughtUp waits until node i's own state (a serializable read) has
// reached revision rev, or ctx ends.
func (c *Cluster) CaughtUp(ctx context.Context, i int, rev int64) error {
	n := c.Nodes[i]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.EtcdAddr}, DialTimeout: time.Second, Logger: nopLogger()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.Get(gctx, readyKey, clientv3.WithSerializable())
		cancel()
		if err == nil && resp.Header.Revision >= rev {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d has not reached revision %d: %w (last: %v)", n.ID, rev, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
