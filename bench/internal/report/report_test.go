package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/bench/internal/load"
)

// fixedWorkload answers every operation at once; the report tests need
// results with real histograms, not real servers.
type fixedWorkload struct{}

func (fixedWorkload) Worker(int) load.Worker {
	return func(context.Context, int64) error { return nil }
}
func (fixedWorkload) Close() error { return nil }

func result(t *testing.T, name string, ops int64) *load.Result {
	t.Helper()
	r, err := load.Run(t.Context(), name, fixedWorkload{}, load.Options{Clients: 2, Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// withServerCPU sets the server CPU of r's round to usPerOp microseconds
// per operation.
func withServerCPU(r *load.Result, usPerOp float64) *load.Result {
	r.ServerCPU = load.NewCPU(time.Duration(usPerOp*float64(r.Ops.Count))*time.Microsecond, r.Ops.Count)
	return r
}

func sampleReport(t *testing.T) *Report {
	return &Report{
		Title:    "Janus vs etcd vs ZooKeeper",
		Command:  "go run ./bench compare --workloads put,create",
		Started:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Machine:  "2 CPUs, linux/amd64",
		Settings: []string{"--clients=2"},
		Systems:  []string{"janus", "etcd", "zookeeper"},
		Nodes:    1,
		Workloads: []Workload{
			{Name: "put", Protocol: "etcd", Runs: map[string][]*load.Result{
				"janus": {withServerCPU(result(t, "put", 300), 30), withServerCPU(result(t, "put", 300), 20), withServerCPU(result(t, "put", 300), 90)},
				"etcd":  {withServerCPU(result(t, "put", 100), 40), withServerCPU(result(t, "put", 100), 50), withServerCPU(result(t, "put", 100), 45)},
			}},
			{Name: "create", Protocol: "zookeeper", Runs: map[string][]*load.Result{
				"janus":     {result(t, "create", 50)},
				"zookeeper": {result(t, "create", 50)},
			}},
		},
		Memory: []Memory{{System: "etcd", Keys: 1000, ValueSize: 256, RSS: 50 << 20, Disk: 64 << 20, Apparent: 64 << 20, LoadTime: time.Second}},
	}
}

func TestWriteRendersMarkdownAndCharts(t *testing.T) {
	dir := t.TempDir()
	if err := sampleReport(t).Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| workload | system | rounds | ops/s |",
		"| put | janus | 3 |",
		"| put | etcd | 3 |",
		"| create | zookeeper | 1 |",
		"| errors | server CPU µs/op | load generator CPU µs/op |",
		"server CPU/op ratio (Janus/other, lower is better)",
		"| put | etcd |",         // in the ratio table too
		"| create | zookeeper |", // ratio row
		"| etcd | 1000 | 256 | 50.0 MiB | 64.0 MiB |",
		"![throughput](throughput.png)",
		"![latency-put](latency-put.png)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"throughput.png", "latency-put.png", "latency-create.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s does not decode: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != chartW || b.Dy() != chartH {
			t.Errorf("%s is %v, want %dx%d", name, b, chartW, chartH)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "results.json")); err != nil {
		t.Error(err)
	}
}

func TestRatioTableOnlyComparesWorkloadsBothRan(t *testing.T) {
	r := sampleReport(t)
	var b bytes.Buffer
	r.ratioTable(&b)
	out := b.String()
	if strings.Contains(out, "| put | zookeeper |") || strings.Contains(out, "| create | etcd |") {
		t.Errorf("ratio table compares systems that did not run the workload:\n%s", out)
	}
	if !strings.Contains(out, "| put | etcd |") || !strings.Contains(out, "| create | zookeeper |") {
		t.Errorf("ratio table lacks a comparison:\n%s", out)
	}
}

func TestCPUColumns(t *testing.T) {
	r := sampleReport(t)
	var b bytes.Buffer
	r.Markdown(&b, nil)
	md := b.String()
	rows := map[string][]string{}
	for line := range strings.SplitSeq(md, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) == 12 && cells[0] != "workload" {
			rows[cells[0]+"/"+cells[1]] = cells // the throughput table
		}
		if len(cells) == 11 && cells[0] != "workload" {
			rows["ratio "+cells[0]+"/"+cells[1]] = cells
		}
	}
	// Medians of the rounds: Janus 20, 30, 90 -> 30; etcd 40, 50, 45 -> 45.
	if got := rows["put/janus"]; len(got) == 0 || got[10] != "30.0" {
		t.Errorf("put on Janus: row %q, want server CPU 30.0 µs/op", got)
	}
	if got := rows["put/etcd"]; len(got) == 0 || got[10] != "45.0" {
		t.Errorf("put on etcd: row %q, want server CPU 45.0 µs/op", got)
	}
	if got := rows["ratio put/etcd"]; len(got) == 0 || got[8] != "0.67x" {
		t.Errorf("put ratio row %q, want server CPU/op ratio 0.67x", got)
	}
	// The create rounds measured no server CPU: shown as unknown, not 0.
	if got := rows["create/zookeeper"]; len(got) == 0 || got[10] != "-" {
		t.Errorf("create on ZooKeeper: row %q, want server CPU -", got)
	}
	if got := rows["ratio create/zookeeper"]; len(got) == 0 || got[8] != "-" {
		t.Errorf("create ratio row %q, want server CPU/op ratio -", got)
	}
	// Every round ran through load.Run, which reads the load generator's
	// CPU.
	for k, row := range rows {
		if !strings.HasPrefix(k, "ratio ") && (len(row) < 12 || row[11] == "-") {
			t.Errorf("%s: row %q has no load generator CPU", k, row)
		}
	}
}

// TestOfCeilingColumns checks that every system's throughput is divided by
// the ceiling's in the same workload, and that a workload the ceiling did
// not run says so instead of showing a ratio.
func TestOfCeilingColumns(t *testing.T) {
	r := sampleReport(t)
	r.Systems = append(r.Systems, Ceiling)
	// One operation per round, so a round's throughput is 1/elapsed:
	// give the ceiling rounds that finish four times faster than etcd's.
	etcd := r.Workloads[0].Runs["etcd"]
	var ceil []*load.Result
	for _, e := range etcd {
		c := *e
		c.Ops.Throughput = e.Ops.Throughput * 4
		ceil = append(ceil, &c)
	}
	r.Workloads[0].Runs[Ceiling] = ceil
	var b bytes.Buffer
	r.ratioTable(&b)
	rows := map[string][]string{}
	for line := range strings.SplitSeq(b.String(), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) == 11 && cells[0] != "workload" {
			rows[cells[0]+"/"+cells[1]] = cells
		}
	}
	if _, ok := rows["put/ceiling"]; ok {
		t.Errorf("the ceiling got a ratio row of its own: %q", rows["put/ceiling"])
	}
	a, e, c := Summarize(r.Workloads[0].Runs["janus"]), Summarize(etcd), Summarize(ceil)
	put := rows["put/etcd"]
	if len(put) == 0 {
		t.Fatalf("no put row in:\n%s", b.String())
	}
	if want := fraction(a.Throughput, c.Throughput); put[9] != want {
		t.Errorf("Janus of ceiling = %q, want %q", put[9], want)
	}
	if put[10] != "0.25" {
		t.Errorf("etcd of ceiling = %q, want 0.25 (the ceiling ran 4x etcd's rate; etcd %v, ceiling %v)", put[10], e.Throughput, c.Throughput)
	}
	if create := rows["create/zookeeper"]; len(create) == 0 || create[9] != "-" || create[10] != "-" {
		t.Errorf("create row %q: the ceiling did not run create, want - in both ceiling columns", create)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestChartsWithNoData(t *testing.T) {
	// Empty inputs must still produce decodable images, not panics.
	var b bytes.Buffer
	if err := BarChart(&b, "empty", "ops/s", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&b); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := LatencyChart(&b, "empty", []string{"a"}, [][]time.Duration{nil}); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&b); err != nil {
		t.Fatal(err)
	}
}

func TestEveryGlyphIsFiveWide(t *testing.T) {
	for r, g := range glyphs {
		for _, row := range g {
			if len(row) != glyphW {
				t.Errorf("glyph %q has a row %q of width %d, want %d", r, row, len(row), glyphW)
			}
		}
	}
}

func TestReadRendersAgainFromJSON(t *testing.T) {
	dir := t.TempDir()
	if err := sampleReport(t).Write(dir); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Read(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if err := r.Write(again); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(filepath.Join(again, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The tables come from the per-round summaries, which JSON keeps.
	if string(first) != string(second) {
		t.Errorf("report rendered from results.json differs:\n--- first\n%s\n--- again\n%s", first, second)
	}
}
