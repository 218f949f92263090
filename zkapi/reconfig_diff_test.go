package zkapi_test

import (
	"context"
	"fmt"
	"os"
	"slices"
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
	other, _ := strconv.Atoi(followers[1])
	_, password, _ := strings.Cut(superCred, ":")
	args := []string{addrs[conn-1], strconv.Itoa(leader), followers[0], followers[1], addrs[other-1], password}
	for _, p := range ports {
		args = append(args, strconv.Itoa(p))
	}
	out := testenv.RunPython(t, string(script), args...)
	return strings.Split(strings.TrimSpace(out), "\n")
}

// grantConfigWrite is what an operator does so that reconfig needs no
// super user: as super, give everyone every right on /zookeeper/config.
const grantConfigWrite = `
import sys
from kazoo.client import KazooClient
from kazoo.security import make_acl
c = KazooClient(hosts=sys.argv[1], auth_data=[("digest", "super:" + sys.argv[2])])
c.start()
c.set_acls("/zookeeper/config", [make_acl("world", "anyone", all=True)])
c.stop()
`

// reconfigZkCli continues reconfigScript's session with zkCli.sh, connected
// to the same follower: config, reconfig refused without the right, then
// -remove and -add once /zookeeper/config grants WRITE to everyone. The
// ensemble's own members are named by role, as reconfigScript does.
func reconfigZkCli(t *testing.T, addrs []string, leader int, ports []int) []string {
	t.Helper()
	names := map[string]string{strconv.Itoa(leader): "L"}
	var conn string
	for id := 1; id <= 3; id++ {
		if id == leader {
			continue
		}
		if conn == "" {
			conn = addrs[id-1]
			names[strconv.Itoa(id)] = "C"
		} else {
			names[strconv.Itoa(id)] = "F"
		}
	}
	joiner := fmt.Sprintf("server.9=127.0.0.1:%d:%d:observer;127.0.0.1:%d", ports[12], ports[13], ports[14])
	out := testenv.ZkCli(t, conn, "config", "reconfig -remove 7", "reconfig -v 1 -remove 7", "reconfig -v zz -remove 7")
	_, password, _ := strings.Cut(superCred, ":")
	testenv.RunPython(t, grantConfigWrite, conn, password)
	out += testenv.ZkCli(t, conn, "reconfig -remove 7", "reconfig -add "+joiner, "config")
	// conf's quorum lines and membership (the ports differ).
	conf, err := testenv.FourLetterWord(t.Context(), conn, "conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(conf, "\n") {
		key, _, _ := strings.Cut(line, "=")
		switch {
		case key == "electionAlg" || key == "peerType" || strings.HasPrefix(key, "server.") || key == "version" || line == "membership: ":
			out += "conf " + line + "\n"
		case key == "electionPort" || key == "quorumPort":
			out += "conf " + key + "\n"
		}
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		prefix, line := "", line
		if rest, ok := strings.CutPrefix(line, "conf "); ok {
			prefix, line = "conf ", rest
		}
		key, value, _ := strings.Cut(line, "=")
		switch id, isServer := strings.CutPrefix(key, "server."); {
		case key == "version":
			line = "version=V"
		case isServer && names[id] != "":
			server, _, _ := strings.Cut(value, ";")
			line = "server." + names[id] + "=" + server[strings.LastIndexByte(server, ':')+1:]
		}
		lines = append(lines, "zkCli: "+prefix+line)
	}
	// Each block of server lines in one order: the members' IDs, and so
	// the order ZooKeeper lists them in, differ between the two runs.
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && (strings.HasPrefix(lines[j], "zkCli: server.") || strings.HasPrefix(lines[j], "zkCli: conf server.")) {
			j++
		}
		slices.Sort(lines[i:j])
		i = max(j, i+1)
	}
	return lines
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
	want = append(want, reconfigZkCli(t, ref.Addrs(), leader.ID, ports)...)
	for _, s := range ref.Servers {
		s.Stop() // the machine is shared: one ensemble at a time
	}

	j := startJanusEnsemble(t, 3, zkapi.Config{ReconfigEnabled: true, SuperDigest: superDigest(superCred), FourLetterWhitelist: []string{"*"}})
	jl := j.Leader(t) + 1
	got := reconfigScript(t, j.Addrs(), jl, ports)
	got = append(got, reconfigZkCli(t, j.Addrs(), jl, ports)...)
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

// TestCuratorEnsembleTracker: Curator 5 tracks /zookeeper/config by
// default and rewrites its connection string from the client addresses
// there; connected to one Janus member it must find all three, and after
// a reconfig through Curator's own API, the added one.
func TestCuratorEnsembleTracker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Curator")
	}
	ports := testenv.FreePorts(t, 3)
	j := startJanusEnsemble(t, 3, zkapi.Config{ReconfigEnabled: true, SuperDigest: superDigest(superCred)})
	_, password, _ := strings.Cut(superCred, ":")
	joinerClient := fmt.Sprintf("127.0.0.1:%d", ports[2])
	joiner := fmt.Sprintf("server.4=127.0.0.1:%d:%d:observer;%s", ports[0], ports[1], joinerClient)
	out := testenv.RunJava(t, "testdata/CuratorEnsemble.java", "CuratorEnsemble", j.Addrs()[0], password, joiner, joinerClient)
	addrs := j.Addrs()
	slices.Sort(addrs)
	want := "connect " + strings.Join(addrs, ",") + "\n"
	addrs = append(addrs, joinerClient)
	slices.Sort(addrs)
	wantAfter := "connect " + strings.Join(addrs, ",") + "\n"
	lines := strings.SplitAfter(out, "\n")
	if len(lines) < 4 || lines[0] != want || !strings.HasPrefix(lines[1], "config server.1=") ||
		!strings.Contains(lines[2], joiner) || lines[3] != wantAfter {
		t.Fatalf("Curator printed:\n%s\nwant the lines %q, config, reconfig, %q", out, want, wantAfter)
	}
}
