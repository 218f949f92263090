package zkapi_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
)

// reconfigScript runs testdata/kazoo_reconfig.py against the server at
// addrs[conn] of a 3-member ensemble whose members have IDs 1..3 and
// whose leader has ID leader, and returns its normalized lines.
func reconfigScript(t *testing.T, addrs []string, leader int, ports []int) []string {
	t.Helper()
	script, err := os.ReadFile("testdata/kazoo_reconfig.py")
	if err != nil {
		t.Fatal(err)
	}
	var followers []string
	for id := 1; id <= 3; id++ {
		if id != leader {
			followers = append(followers, strconv.Itoa(id))
		}
	}
	conn, _ := strconv.Atoi(followers[0])
	_, password, _ := strings.Cut(superCred, ":")
	args := []string{addrs[conn-1], strconv.Itoa(leader), followers[0], followers[1], password}
	for _, p := range ports {
		args = append(args, strconv.Itoa(p))
	}
	out := testenv.RunPython(t, string(script), args...)
	return strings.Split(strings.TrimSpace(out), "\n")
}

// TestReconfigAgainstZooKeeper runs the same reconfig session through
// kazoo against a ZooKeeper 3.8 ensemble (reconfigEnabled=true) and a
// Janus one, and compares them step by step: /zookeeper/config's content
// (the ensemble's own members named by role, since their addresses
// differ) and stat, its ACL, the watch that a committed configuration
// fires, and each reconfig's answer, errors included.
func TestReconfigAgainstZooKeeper(t *testing.T) {
	ports := testenv.FreePorts(t, 15)
	ref := testenv.StartZooKeeperEnsembleWith(t, 3, testenv.ZKOptions{
		Config:   map[string]string{"reconfigEnabled": "true"},
		JVMFlags: []string{"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + superDigest(superCred)},
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	leader, err := ref.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := reconfigScript(t, ref.Addrs(), leader.ID, ports)
	for _, s := range ref.Servers {
		s.Stop() // the machine is shared: one ensemble at a time
	}

	j := startJanusEnsemble(t, 3, zkapi.Config{ReconfigEnabled: true, SuperDigest: superDigest(superCred)})
	got := reconfigScript(t, j.Addrs(), j.Leader(t)+1, ports)
	t.Logf("ZooKeeper 3.8:\n%s", strings.Join(want, "\n"))
	if len(got) != len(want) {
		t.Fatalf("Janus printed %d steps, ZooKeeper %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d:\n Janus:     %s\n ZooKeeper: %s", i, got[i], want[i])
		}
	}
}
