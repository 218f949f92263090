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
				"janus": {result(t, "put", 300), result(t, "put", 300), result(t, "put", 300)},
				"etcd":  {result(t, "put", 100), result(t, "put", 100), result(t, "put", 100)},
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
