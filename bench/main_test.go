package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/januskv/janus/bench/internal/load"
	"github.com/januskv/janus/bench/internal/report"
	"github.com/januskv/janus/bench/internal/servers"
	"github.com/januskv/janus/internal/testenv"
)

func TestRunCommandPrintsTextAndJSON(t *testing.T) {
	e := testenv.StartEtcd(t)
	var out, errOut bytes.Buffer
	args := []string{"run", "--workload", "put", "--endpoints", e.Endpoints[0],
		"--ops", "30", "--clients", "3", "--conns", "2", "--json", "-"}
	if err := run(t.Context(), args, &out, &errOut); err != nil {
		t.Fatalf("bench run: %v\nstderr: %s", err, errOut.String())
	}
	text, js, ok := strings.Cut(out.String(), "{")
	if !ok {
		t.Fatalf("no JSON in output:\n%s", out.String())
	}
	for _, want := range []string{"put against", "30 in", "0 errors", "p99.9", "load generator"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
	var res load.Result
	if err := json.Unmarshal([]byte("{"+js), &res); err != nil {
		t.Fatalf("JSON output: %v", err)
	}
	if res.Ops.Count != 30 || res.Errors != 0 {
		t.Errorf("JSON says %d ops, %d errors; want 30, 0", res.Ops.Count, res.Errors)
	}
	// bench run knows no server processes: the load generator's CPU only.
	if res.ClientCPU == nil || res.ServerCPU != nil {
		t.Errorf("JSON says client CPU %+v, server CPU %+v; want only the client's", res.ClientCPU, res.ServerCPU)
	}
}

func TestRunCommandRejectsUnknownWorkload(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"run", "--workload", "nope"}, &out, &errOut); err == nil {
		t.Error("bench run --workload nope succeeded")
	}
}

// TestCompareStartsMeasuresAndStops runs a tiny comparison of the real etcd
// and ZooKeeper through the launcher: it checks the report's shape, not
// its figures.
func TestCompareStartsMeasuresAndStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	etcdBin := testenv.EtcdPath(t)
	testenv.StartZooKeeper(t, testenv.ZKOptions{}).Stop() // skips the test without Debian's ZooKeeper
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"compare", "--systems", "etcd,zookeeper", "--workloads", "put,create",
		"--rounds", "1", "--ops", "40", "--clients", "4", "--conns", "2", "--mem-keys", "200",
		"--zk-heap", "256m", "--etcd-bin", etcdBin, "--work-dir", t.TempDir(), "--out", out}
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench compare: %v\n%s", err, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| put | etcd | 1 |", "| create | zookeeper | 1 |", "| etcd | 200 | 256 |", "| zookeeper | 200 | 256 |", "| server CPU µs/op |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "failed") {
		t.Errorf("report notes a failure:\n%s", md)
	}
	for _, f := range []string{"throughput.png", "latency-put.png", "latency-create.png", "results.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// Every measured round carries the servers' CPU and the load
	// generator's: the etcd process and the ZooKeeper JVM were found.
	rep, err := report.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, wl := range rep.Workloads {
		for sys, runs := range wl.Runs {
			for _, r := range runs {
				if r.ServerCPU == nil || r.ClientCPU == nil {
					t.Errorf("%s on %s: server CPU %+v, client CPU %+v; want both", wl.Name, sys, r.ServerCPU, r.ClientCPU)
				}
			}
		}
	}
}

// TestCompareThreeNodeJanus starts a 3-member Janus ensemble through the
// launcher, then through compare, which runs one tiny warm-up and one measured round of put and
// create against all three members: every operation done, none failed.
// It checks counts, never timings.
func TestCompareThreeNodeJanus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Janus and starts three servers")
	}
	root, err := repoRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "janus")
	if err := goBuild(t.Context(), root, bin, "."); err != nil {
		t.Fatal(err)
	}

	// The launcher hands the workloads every member's addresses.
	l := &servers.Launcher{Dir: t.TempDir(), JanusBin: bin}
	s, err := l.Start(t.Context(), "janus", 3)
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if len(s.EtcdEndpoints) != 3 || len(s.ZKServers) != 3 || len(s.HTTPURLs) != 3 || len(s.DataDirs) != 3 {
		t.Fatalf("ensemble addresses: etcd %v, zookeeper %v, http %v, data %v", s.EtcdEndpoints, s.ZKServers, s.HTTPURLs, s.DataDirs)
	}
	seen := map[string]bool{}
	for _, a := range slices.Concat(s.EtcdEndpoints, s.ZKServers, s.HTTPURLs) {
		if seen[a] {
			t.Errorf("address %s given twice", a)
		}
		seen[a] = true
	}

	c := compareConfig{
		opts: load.Options{Clients: 6, Conns: 3, KeySize: 8, ValueSize: 32, KeySpace: 20,
			Ops: 60, ReadRatio: 0.5, Watchers: 3},
		systems:   []string{"janus"},
		workloads: []string{"put", "create"},
		nodes:     3,
		rounds:    1,
		workDir:   t.TempDir(),
		janusBin:  bin,
		memKeys:   100,
		profile:   true,
		out:       t.TempDir(),
		// The measured round is profiled too (one round: one more file).
		profileRounds: true,
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rep, err := compare(t.Context(), c, logger)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range rep.Notes {
		if !strings.HasPrefix(n, "CPU profiles") {
			t.Errorf("report note: %q", n)
		}
	}
	for _, w := range c.workloads {
		for i := 1; i <= 3; i++ {
			for _, name := range []string{fmt.Sprintf("profile-%s-janus%d.pb.gz", w, i), fmt.Sprintf("profile-%s-janus%d-r1.pb.gz", w, i)} {
				if _, err := os.Stat(filepath.Join(c.out, name)); err != nil {
					t.Error(err)
				}
			}
		}
	}
	if len(rep.Workloads) != 2 {
		t.Fatalf("%d workloads in the report, want 2", len(rep.Workloads))
	}
	for _, wl := range rep.Workloads {
		runs := append([]*load.Result{wl.Warmup["janus"]}, wl.Runs["janus"]...)
		if len(runs) != 2 || runs[0] == nil {
			t.Errorf("%s: warm-up %v and %d measured rounds, want one of each", wl.Name, runs[0], len(runs)-1)
			continue
		}
		for _, r := range runs {
			if r.Ops.Count != c.opts.Ops || r.Errors != 0 {
				t.Errorf("%s: %d ops, %d errors (%q); want %d, 0", wl.Name, r.Ops.Count, r.Errors, r.FirstErrors, c.opts.Ops)
			}
			if r.ServerCPU == nil {
				t.Errorf("%s: no server CPU figure for the three members", wl.Name)
			}
		}
	}
	if len(rep.Memory) != 1 || rep.Memory[0].Error != "" || rep.Memory[0].RSS <= 0 || rep.Memory[0].Disk <= 0 {
		t.Errorf("memory figures of the ensemble: %+v", rep.Memory)
	}
}

func TestShellJoinQuotesWhatAShellWouldSplit(t *testing.T) {
	got := shellJoin([]string{"--workloads", "", "--janus-args", "--reaper-interval 1m", "--out", "it's"})
	want := `--workloads '' --janus-args '--reaper-interval 1m' --out 'it'\''s'`
	if got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}
