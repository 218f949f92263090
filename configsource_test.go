package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/testenv"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigPrecedence: a flag beats the environment, which beats the
// configuration file, which beats the default; each source sets what the
// ones before it left.
func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "janus.yaml", `
data-dir: /from/file
tick-time: 3000          # a bare number for a duration is milliseconds, as in etcd's and ZooKeeper's files
max-client-cnxns: 7
jute-maxbuffer: 4096
election-timeout: 1500
heartbeat-interval: 150
4lw-whitelist: [srvr, mntr]
log-format: text
`)
	env := []string{"JANUS_MAX_CLIENT_CNXNS=8", "JANUS_JUTE_MAXBUFFER=5000", "HOME=/root", "JANUS_NOT_A_FLAG=1"}
	var stderr bytes.Buffer
	cfg, err := parseConfig([]string{"--config-file", file, "--jute-maxbuffer", "6000"}, env, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"data-dir from the file", cfg.DataDir, "/from/file"},
		{"tick-time from the file, in ms", cfg.TickTime, 3 * time.Second},
		{"election-timeout from the file, in ms", cfg.ElectionTimeout, 1500 * time.Millisecond},
		{"heartbeat-interval from the file, in ms", cfg.HeartbeatInterval, 150 * time.Millisecond},
		{"max-client-cnxns: env over file", cfg.MaxClientConns, 8},
		{"jute-maxbuffer: flag over env and file", cfg.MaxBuffer, 6000},
		{"4lw-whitelist: a YAML list", cfg.FourLetterWords, "srvr,mntr"},
		{"log-format from the file", cfg.LogFormat, "text"},
		{"zk-listen: the default", cfg.ZKListen, "127.0.0.1:2181"},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(stderr.String(), "JANUS_NOT_A_FLAG") {
		t.Errorf("an unknown JANUS_ variable is not reported: %q", stderr.String())
	}
}

// TestInvalidConfigurationIsOneLineNamingTheKey: start-up stops with one
// line that names the file (or variable) and the key.
func TestInvalidConfigurationIsOneLineNamingTheKey(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"unknown key", []string{"--config-file", writeFile(t, "a.yaml", "data-dir: x\nno-such-key: 1\n")}, nil, []string{"a.yaml", `"no-such-key"`}},
		{"bad value", []string{"--config-file", writeFile(t, "b.yaml", "tick-time: soon\n")}, nil, []string{"b.yaml", `"tick-time"`}},
		{"a map where a value goes", []string{"--config-file", writeFile(t, "c.yaml", "peers: {a: b}\n")}, nil, []string{"c.yaml", `"peers"`}},
		{"not YAML", []string{"--config-file", writeFile(t, "d.yaml", "data-dir: [\n")}, nil, []string{"d.yaml"}},
		{"bad environment value", nil, []string{"JANUS_TICK_TIME=often"}, []string{"JANUS_TICK_TIME"}},
		{"bad log format", []string{"--log-format", "xml"}, nil, []string{"--log-format"}},
		{"zoo.cfg unknown key", []string{"--zk-config", writeFile(t, "e.cfg", "tickTime=2000\nfancyNewKey=1\n")}, nil, []string{"e.cfg", `"fancyNewKey"`}},
		{"zoo.cfg bad server line", []string{"--zk-config", writeFile(t, "f.cfg", "server.1=nohost\n")}, nil, []string{"f.cfg", `"server.1"`}},
		{"zoo.cfg bad tickTime", []string{"--zk-config", writeFile(t, "g.cfg", "tickTime=fast\n")}, nil, []string{"g.cfg", `"tickTime"`}},
		{"zoo.cfg bad purgeInterval", []string{"--zk-config", writeFile(t, "h.cfg", "autopurge.purgeInterval=-1\n")}, nil, []string{"h.cfg", `"autopurge.purgeInterval"`}},
	}
	for _, c := range cases {
		_, err := parseConfig(c.args, c.env, io.Discard)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %s", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans several lines: %q", c.name, err)
		}
	}
}

// TestZooCfgFromDebian reads the zoo.cfg Debian's zookeeper package ships
// as its example.
func TestZooCfgFromDebian(t *testing.T) {
	const example = "/etc/zookeeper/conf_example/zoo.cfg"
	_, statErr := os.Stat(example)
	testenv.Need(t, "zookeeper", statErr == nil, fmt.Sprint(statErr))
	var stderr bytes.Buffer
	cfg, err := parseConfig([]string{"--zk-config", example}, nil, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	// tickTime=2000 initLimit=10 syncLimit=5 dataDir=/tmp/zookeeper clientPort=2181
	if cfg.TickTime != 2*time.Second || cfg.ElectionTimeout != 10*time.Second ||
		cfg.DataDir != "/tmp/zookeeper" || cfg.ZKListen != "0.0.0.0:2181" || !cfg.DisableExtendedTypes {
		t.Errorf("from Debian's zoo.cfg: tick %v, election timeout %v, data dir %q, zk listen %q, extended types off %v",
			cfg.TickTime, cfg.ElectionTimeout, cfg.DataDir, cfg.ZKListen, cfg.DisableExtendedTypes)
	}
	if !strings.Contains(stderr.String(), "initLimit") {
		t.Errorf("ignored keys not reported: %q", stderr.String())
	}
}

// TestZooCfgEnsembleStarts starts three members, each from the zoo.cfg of
// one server of a 3-server ensemble (ZooKeeper's documented layout: the
// same server.N lines, a myid file in each dataDir), and checks that they
// form one ensemble that ZooKeeper clients use.
func TestZooCfgEnsembleStarts(t *testing.T) {
	const n = 3
	var servers strings.Builder
	clientAddrs := make([]string, n)
	for i := 1; i <= n; i++ {
		peer := freeAddr(t)
		host, port, _ := strings.Cut(peer, ":")
		clientAddrs[i-1] = freeAddr(t)
		_, clientPort, _ := strings.Cut(clientAddrs[i-1], ":")
		// server.N=host:quorumPort:electionPort;clientPort (3.5+ form).
		fmt.Fprintf(&servers, "server.%d=%s:%s:%d;%s\n", i, host, port, 1, clientPort)
	}
	var conns []string
	for i := 1; i <= n; i++ {
		dataDir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(fmt.Sprintf("%d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, clientPort, _ := strings.Cut(clientAddrs[i-1], ":")
		zooCfg := writeFile(t, "zoo.cfg", fmt.Sprintf(`# a 3-server ensemble, as ZooKeeper's admin guide lays it out
tickTime=200
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
maxClientCnxns=60
4lw.commands.whitelist=srvr, mntr, ruok
extendedTypesEnabled=true
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
%s`, dataDir, clientPort, servers.String()))
		cfg, err := parseConfig([]string{"--zk-config", zooCfg}, nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.AutoCompaction.Mode != "periodic" || cfg.AutoCompaction.Period != time.Hour {
			t.Errorf("server %d: autopurge.purgeInterval=1 gave auto-compaction %+v, want periodic 1h", i, cfg.AutoCompaction)
		}
		if cfg.ID != uint64(i) || len(cfg.Peers) != n || cfg.ElectionTimeout != time.Second || cfg.DisableExtendedTypes || cfg.FourLetterWords != "srvr,mntr,ruok" {
			t.Fatalf("server %d: id %d, peers %v, election timeout %v, extended types off %v, 4lw %q", i, cfg.ID, cfg.Peers, cfg.ElectionTimeout, cfg.DisableExtendedTypes, cfg.FourLetterWords)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan Addrs, 1)
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"--zk-config", zooCfg, "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, io.Discard, ready)
		}()
		select {
		case a := <-ready:
			conns = append(conns, a.ZK)
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("server %d stopped with %v", i, err)
				}
			})
		case err := <-done:
			cancel()
			t.Fatalf("server %d did not start: %v", i, err)
		}
	}
	if conns[0] != clientAddrs[0] {
		t.Fatalf("server 1 serves ZooKeeper on %s, zoo.cfg says %s", conns[0], clientAddrs[0])
	}
	writer, _, err := zk.Connect(conns[:1], 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	var created string
	for deadline := time.Now().Add(30 * time.Second); ; {
		created, err = writer.Create("/from-zoo-cfg", []byte("x"), 0, zk.WorldACL(zk.PermAll))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create through server 1: %v", err)
	}
	reader, _, err := zk.Connect(conns[2:], 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.Sync(created); err != nil {
		t.Fatal(err)
	}
	if data, _, err := reader.Get(created); err != nil || string(data) != "x" {
		t.Fatalf("read through server 3: %q %v", data, err)
	}
}

// TestJSONLogsParse: with the default format every line the server writes
// while it starts, serves and stops is one JSON object with time, level,
// msg and the member's ID.
func TestJSONLogsParse(t *testing.T) {
	var out bytes.Buffer
	w := &syncWriter{w: &out}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data-dir", t.TempDir(), "--id", "10", "--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, w, ready)
	}()
	var a Addrs
	select {
	case a = <-ready:
	case err := <-done:
		cancel()
		t.Fatal(err)
	}
	conn, _, err := zk.Connect([]string{a.ZK}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/x", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	logs := out.String()
	w.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) < 3 {
		t.Fatalf("only %d log lines:\n%s", len(lines), logs)
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("no %q in %q", k, l)
			}
		}
		if rec["member_id"] != "a" {
			t.Errorf("member_id %v, want \"a\" (10 in hex) in %q", rec["member_id"], l)
		}
	}
}

// TestZooCfgDynamicFile reads the ensemble as ZooKeeper 3.5+ writes it:
// server.N lines (with election port, role and client part) inline or in
// the file dynamicConfigFile names, and a version (a version= line inline,
// the hexadecimal suffix of the dynamic file's name) that makes a member
// with no state yet join the running ensemble.
func TestZooCfgDynamicFile(t *testing.T) {
	const servers = "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n" +
		"server.2=127.0.0.2:2888:3888;2182\n" +
		"server.3=127.0.0.3:2888:3888:observer;0.0.0.0:2183\n"
	wantPeers := map[uint64]string{1: "127.0.0.1:2888", 2: "127.0.0.2:2888"}
	wantObservers := map[uint64]string{3: "127.0.0.3:2888"}
	wantZK := map[uint64]string{1: "127.0.0.1:2181", 2: "127.0.0.2:2182", 3: "127.0.0.3:2183"}
	wantElection := map[uint64]string{1: "127.0.0.1:3888", 2: "127.0.0.2:3888", 3: "127.0.0.3:3888"}

	// stateDir is a data directory holding Janus state (a zab log).
	stateDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(stateDir, "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, "log", "00000001.seg"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		dataDir  string // "" for a fresh one
		zooCfg   string // %s is the data dir
		dynName  string // the dynamic file's name, next to zoo.cfg
		dynamic  string // its content
		wantJoin bool
	}{
		{name: "inline lines", zooCfg: "dataDir=%s\n" + servers},
		{name: "inline lines with version", zooCfg: "dataDir=%s\n" + servers + "version=100000000\n", wantJoin: true},
		{name: "inline lines with version 0", zooCfg: "dataDir=%s\n" + servers + "version=0\n"},
		{name: "dynamic file without version", zooCfg: "dataDir=%s\ndynamicConfigFile=zoo.cfg.dynamic\n", dynName: "zoo.cfg.dynamic", dynamic: servers},
		{name: "dynamic file with version 0", zooCfg: "dataDir=%s\ndynamicConfigFile=zoo.cfg.dynamic.0\n", dynName: "zoo.cfg.dynamic.0", dynamic: servers},
		{name: "dynamic file with version, fresh data dir", zooCfg: "dataDir=%s\ndynamicConfigFile=zoo.cfg.dynamic.100000007\n", dynName: "zoo.cfg.dynamic.100000007", dynamic: servers, wantJoin: true},
		{name: "dynamic file with version, data dir with state", dataDir: stateDir, zooCfg: "dataDir=%s\ndynamicConfigFile=zoo.cfg.dynamic.100000007\n", dynName: "zoo.cfg.dynamic.100000007", dynamic: servers},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			dataDir := c.dataDir
			if dataDir == "" {
				dataDir = t.TempDir()
			}
			if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte("2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			zooCfg := filepath.Join(dir, "zoo.cfg")
			if err := os.WriteFile(zooCfg, []byte(fmt.Sprintf(c.zooCfg, dataDir)), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.dynName != "" {
				if err := os.WriteFile(filepath.Join(dir, c.dynName), []byte(c.dynamic), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := parseConfig([]string{"--zk-config", zooCfg}, nil, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				what      string
				got, want any
			}{
				{"id from myid", cfg.ID, uint64(2)},
				{"peers", cfg.Peers, wantPeers},
				{"observers", cfg.Observers, wantObservers},
				{"zk client addresses", cfg.PeerZK, wantZK},
				{"election addresses", cfg.PeerZKElection, wantElection},
				{"joins", cfg.Join, c.wantJoin},
			} {
				if fmt.Sprint(f.got) != fmt.Sprint(f.want) {
					t.Errorf("%s: got %v, want %v", f.what, f.got, f.want)
				}
			}
		})
	}
}

// TestZooCfgDynamicFileRefusals: what ZooKeeper refuses in the ensemble
// lines stops Janus with one line naming the file and the key.
func TestZooCfgDynamicFileRefusals(t *testing.T) {
	for _, c := range []struct {
		name, zooCfg, dynamic string
		want                  []string
	}{
		{"server line in zoo.cfg too", "dynamicConfigFile=zoo.cfg.dynamic\nserver.1=127.0.0.1:2888:3888\n", "server.2=127.0.0.2:2888:3888\n", []string{"zoo.cfg", `"server.1"`}},
		{"missing dynamic file", "dynamicConfigFile=nowhere.dynamic\n", "", []string{"zoo.cfg", "dynamicConfigFile"}},
		{"other key in the dynamic file", "dynamicConfigFile=zoo.cfg.dynamic\n", "server.1=127.0.0.1:2888:3888\ntickTime=10\n", []string{"zoo.cfg.dynamic", `"tickTime"`}},
		{"version inside the dynamic file", "dynamicConfigFile=zoo.cfg.dynamic\n", "server.1=127.0.0.1:2888:3888\nversion=100000000\n", []string{"zoo.cfg.dynamic", `"version"`}},
		{"inline version not hex", "server.1=127.0.0.1:2888:3888\nversion=zz\n", "", []string{"zoo.cfg", `"version"`}},
		{"bad election port", "server.1=127.0.0.1:2888:x\n", "", []string{"zoo.cfg", `"server.1"`, "election port"}},
		{"bad client port", "server.1=127.0.0.1:2888:3888;host:x\n", "", []string{"zoo.cfg", `"server.1"`, "client port"}},
		{"too many parts", "server.1=127.0.0.1:2888:3888:4888\n", "", []string{"zoo.cfg", `"server.1"`}},
		{"hierarchical quorum", "dynamicConfigFile=zoo.cfg.dynamic\n", "server.1=127.0.0.1:2888:3888\ngroup.1=1\n", []string{"zoo.cfg", `"group.1"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			zooCfg := filepath.Join(dir, "zoo.cfg")
			if err := os.WriteFile(zooCfg, []byte(c.zooCfg), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.dynamic != "" {
				if err := os.WriteFile(filepath.Join(dir, "zoo.cfg.dynamic"), []byte(c.dynamic), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := parseConfig([]string{"--zk-config", zooCfg}, nil, io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %s", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}
