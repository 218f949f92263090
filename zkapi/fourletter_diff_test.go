package zkapi_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
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
		for _, cmd := range []string{"srvr", "stat", "cons", "conf", "mntr", "wchs", "wchp", "wchc", "dump", "dirs"} {
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
	for _, cmd := range []string{"srvr", "stat", "cons", "wchs", "wchp", "wchc", "dump", "dirs"} {
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
	if !isSubsequence(order, zkConf) || len(order) < 12 {
		t.Errorf("conf keys %v, ZooKeeper's %v", order, zkConf)
	}
	for _, k := range []string{"dataDir", "dataDirSize", "dataLogDir", "dataLogSize"} {
		if !contains(order, k) {
			t.Errorf("conf lacks %s:\n%s", k, jn["conf"])
		}
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
	// Every gauge ZooKeeper prints (its counters and summaries describe
	// its request pipeline), in ZooKeeper's order, with a value of the
	// same type: monitoring scripts parse them.
	zkGauges := []string{"zk_version", "zk_server_state", "zk_ephemerals_count", "zk_num_alive_connections",
		"zk_avg_latency", "zk_outstanding_requests", "zk_znode_count", "zk_global_sessions",
		"zk_non_mtls_remote_conn_count", "zk_last_client_response_size", "zk_packets_sent", "zk_packets_received",
		"zk_max_client_response_size", "zk_connection_drop_probability", "zk_watch_count", "zk_auth_failed_count",
		"zk_min_latency", "zk_max_file_descriptor_count", "zk_approximate_data_size", "zk_open_file_descriptor_count",
		"zk_local_sessions", "zk_uptime", "zk_max_latency", "zk_outstanding_tls_handshake",
		"zk_min_client_response_size", "zk_non_mtls_local_conn_count"}
	var zkOrder, jnOrder []string
	for _, k := range keys(zk["mntr"], "\t") {
		if contains(zkGauges, k) {
			zkOrder = append(zkOrder, k)
		}
	}
	for _, k := range keys(jn["mntr"], "\t") {
		if contains(zkGauges, k) {
			jnOrder = append(jnOrder, k)
		}
	}
	if !slices.Equal(zkOrder, zkGauges) {
		t.Errorf("ZooKeeper's mntr gauges are %v, the test expects %v", zkOrder, zkGauges)
	}
	if !slices.Equal(jnOrder, zkOrder) {
		t.Errorf("mntr gauges %v, ZooKeeper prints %v", jnOrder, zkOrder)
	}
	for _, k := range zkGauges[1:] {
		if shape(zkMntr[k]) != shape(jnMntr[k]) {
			t.Errorf("mntr %s = %q, ZooKeeper prints %q", k, jnMntr[k], zkMntr[k])
		}
	}
	for _, k := range []string{"zk_max_client_response_size", "zk_max_file_descriptor_count"} {
		if zkMntr[k] != jnMntr[k] {
			t.Errorf("mntr %s = %q, ZooKeeper prints %q", k, jnMntr[k], zkMntr[k])
		}
	}
}

// TestStatResetsMatchZooKeeper runs srst and crst on a real ZooKeeper 3.8
// and Janus after the same session's requests: both answer the same
// words, and the counters they reset go back on both.
func TestStatResetsMatchZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper")
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	j := startJanus(t, zkapi.Config{FourLetterWhitelist: []string{"*"}})
	for name, addr := range map[string]string{"zookeeper": ref.Addr, "janus": j.Addr} {
		t.Run(name, func(t *testing.T) { checkStatResets(t, addr) })
	}
}

// checkStatResets makes 30 requests on one session, then checks that srst
// takes srvr's and mntr's counters back below what those requests alone
// made, and crst the session's connection counters in cons.
func checkStatResets(t *testing.T, addr string) {
	const requests = 30
	c, _ := connect(t, addr, 10*time.Second)
	if _, err := c.Create("/r", []byte("abc"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	for range requests {
		if _, _, err := c.Get("/r"); err != nil {
			t.Fatal(err)
		}
	}
	word := func(cmd string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := testenv.FourLetterWord(ctx, addr, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
	srvrCount := func(out, key string) int {
		t.Helper()
		n, err := strconv.Atoi(strings.TrimPrefix(lineWith(out, key), key))
		if err != nil {
			t.Fatalf("srvr %q: %v\n%s", key, err, out)
		}
		return n
	}
	consReceived := func(out string) int {
		t.Helper()
		m := recvedRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no session connection in cons:\n%s", out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if n := consReceived(word("cons")); n < requests {
		t.Fatalf("cons shows %d requests received before crst, want at least %d", n, requests)
	}
	if got := word("crst"); got != "Connection stats reset.\n" {
		t.Errorf("crst answers %q", got)
	}
	// Pings may arrive in between, one per third of the session timeout.
	if n := consReceived(word("cons")); n >= requests {
		t.Errorf("cons shows %d requests received after crst, want fewer than %d", n, requests)
	}
	if n := srvrCount(word("srvr"), "Received: "); n < requests {
		t.Fatalf("srvr shows %d packets received before srst, want at least %d", n, requests)
	}
	if got := word("srst"); got != "Server stats reset.\n" {
		t.Errorf("srst answers %q", got)
	}
	out := word("srvr")
	if n := srvrCount(out, "Received: "); n >= requests {
		t.Errorf("srvr shows %d packets received after srst, want fewer than %d", n, requests)
	}
	if n := srvrCount(out, "Sent: "); n >= requests {
		t.Errorf("srvr shows %d packets sent after srst, want fewer than %d", n, requests)
	}
}

// recvedRE finds a session connection's received count in cons.
var recvedRE = regexp.MustCompile(`recved=(\d+),sent=\d+,sid=0x[0-9a-f]+`)

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
