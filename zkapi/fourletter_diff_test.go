package zkapi_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
)

// numbers matches the figures that differ between two servers doing the
// same work (counters, latencies, times, ports, zxids, session ids).
var numbers = regexp.MustCompile(`0x[0-9a-f]+|[0-9]+(\.[0-9]+)?`)

func shape(line string) string { return numbers.ReplaceAllString(line, "N") }

// TestFourLetterWordsMatchZooKeeper runs the same session against a real
// ZooKeeper 3.8 and Janus and compares what srvr, stat, cons, conf and mntr
// print: the same lines in the same formats, and the same node, ephemeral,
// watch and session counts and data size.
func TestFourLetterWordsMatchZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper")
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	j := startJanus(t, zkapi.Config{FourLetterWhitelist: []string{"*"}}) // as the reference server
	outputs := map[string]map[string]string{}
	for name, addr := range map[string]string{"zookeeper": ref.Addr, "janus": j.Addr} {
		c, _ := connect(t, addr, 10*time.Second)
		if _, err := c.Create("/x", []byte("abc"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create("/x/e", []byte("abcd"), 1, openACL); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := c.GetW("/x"); err != nil {
			t.Fatal(err)
		}
		outputs[name] = map[string]string{}
		for _, cmd := range []string{"srvr", "stat", "cons", "conf", "mntr", "wchs", "wchp", "wchc", "dump"} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := testenv.FourLetterWord(ctx, addr, cmd)
			cancel()
			if err != nil {
				t.Fatalf("%s %s: %v", name, cmd, err)
			}
			outputs[name][cmd] = out
		}
	}
	zk, jn := outputs["zookeeper"], outputs["janus"]

	// Line by line, numbers aside; the version line is Janus's own,
	// connections may be listed in any order, and dump's expiry times fall
	// into sets by when each server last heard from a client.
	for _, cmd := range []string{"srvr", "stat", "cons", "wchs", "wchp", "wchc", "dump"} {
		want, got := clientsSorted(zk[cmd]), clientsSorted(jn[cmd])
		if len(want) != len(got) {
			t.Errorf("%s: %d lines, ZooKeeper prints %d:\n%s\nZooKeeper:\n%s", cmd, len(got), len(want), jn[cmd], zk[cmd])
			continue
		}
		for i := range want {
			if strings.HasPrefix(want[i], "Zookeeper version: ") {
				continue
			}
			if shape(want[i]) != shape(got[i]) {
				t.Errorf("%s line %d: %q, ZooKeeper prints %q", cmd, i, got[i], want[i])
			}
		}
	}
	for _, key := range []string{"Node count: ", "Connections: ", "Outstanding: "} {
		if a, b := lineWith(zk["srvr"], key), lineWith(jn["srvr"], key); a != b {
			t.Errorf("srvr %q, ZooKeeper prints %q", b, a)
		}
	}

	// conf: ZooKeeper's keys that Janus has, in ZooKeeper's order.
	zkConf := keys(zk["conf"], "=")
	var order []string
	for _, k := range keys(jn["conf"], "=") {
		if contains(zkConf, k) {
			order = append(order, k)
		}
	}
	if !isSubsequence(order, zkConf) || len(order) < 8 {
		t.Errorf("conf keys %v, ZooKeeper's %v", order, zkConf)
	}

	// mntr: every ZooKeeper key Janus prints, with the same counts.
	zkMntr, jnMntr := pairs(zk["mntr"]), pairs(jn["mntr"])
	for _, k := range []string{"zk_server_state", "zk_znode_count", "zk_ephemerals_count", "zk_approximate_data_size",
		"zk_watch_count", "zk_global_sessions", "zk_local_sessions", "zk_num_alive_connections", "zk_outstanding_requests"} {
		if zkMntr[k] != jnMntr[k] {
			t.Errorf("mntr %s = %q, ZooKeeper prints %q", k, jnMntr[k], zkMntr[k])
		}
	}
	for _, k := range []string{"zk_avg_latency", "zk_min_latency", "zk_max_latency", "zk_packets_sent", "zk_packets_received", "zk_uptime"} {
		if shape(zkMntr[k]) != shape(jnMntr[k]) {
			t.Errorf("mntr %s = %q, ZooKeeper prints %q", k, jnMntr[k], zkMntr[k])
		}
	}
	for k := range jnMntr {
		if _, ok := zkMntr[k]; !ok && k != "zk_watched_paths" && k != "zk_last_zxid" && !strings.HasPrefix(k, "janus_") {
			t.Errorf("mntr key %s is not ZooKeeper's", k)
		}
	}
}

// clientsSorted splits out into lines, with the connection lines (" /ip:port...")
// sorted by their shape.
func clientsSorted(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, " expire at ") && !strings.HasPrefix(l, "Connections Sets (") {
			lines = append(lines, l)
		}
	}
	var conns []int
	for i, l := range lines {
		if strings.HasPrefix(l, " /") || strings.HasPrefix(l, "\tip: ") {
			conns = append(conns, i)
		}
	}
	sorted := make([]string, len(conns))
	for k, i := range conns {
		sorted[k] = lines[i]
	}
	slices.SortFunc(sorted, func(a, b string) int { return strings.Compare(shape(a), shape(b)) })
	for k, i := range conns {
		lines[i] = sorted[k]
	}
	return lines
}

func lineWith(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func keys(out, sep string) []string {
	var ks []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, _, _ := strings.Cut(l, sep)
		ks = append(ks, k)
	}
	return ks
}

func pairs(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "\t")
		m[k] = v
	}
	return m
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// isSubsequence reports whether sub appears in seq in the same order.
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}
