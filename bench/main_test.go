package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/januskv/janus/bench/internal/load"
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
	for _, want := range []string{"put against", "30 in", "0 errors", "p99.9"} {
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
	for _, want := range []string{"| put | etcd | 1 |", "| create | zookeeper | 1 |", "| etcd | 200 | 256 |", "| zookeeper | 200 | 256 |"} {
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
}
