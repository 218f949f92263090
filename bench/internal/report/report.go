// Package report turns benchmark results into a report directory: a
// markdown summary of medians and ratios, the raw results as JSON, and PNG
// charts drawn with the standard library alone.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/januskv/janus/bench/internal/hist"
	"github.com/januskv/janus/bench/internal/load"
)

// Report is everything one comparison run measured.
type Report struct {
	Title   string    `json:"title"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	// Machine describes where it ran: CPUs, OS, kernel, Go version.
	Machine string `json:"machine"`
	// Revision is the Janus source revision measured (git describe).
	Revision string `json:"revision,omitempty"`
	// Settings lists the workload options, as flag=value.
	Settings []string `json:"settings"`
	// Systems lists the systems in the order they ran and are shown.
	Systems   []string   `json:"systems"`
	Nodes     int        `json:"nodes"`
	Workloads []Workload `json:"workloads"`
	Memory    []Memory   `json:"memory,omitempty"`
	// LoadAvg is the machine's load averages (1, 5 and 15 minutes, as
	// /proc/loadavg and uptime give them) when the run started and when
	// it ended: what else was competing for the cores.
	LoadAvg []string `json:"load_avg,omitempty"`
	// Notes are free text: what failed to start, what was skipped.
	Notes []string `json:"notes,omitempty"`
}

// Workload holds one workload's rounds on every system that speaks its
// protocol.
type Workload struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"` // etcd or zookeeper
	// Runs maps a system to its measured rounds (warm-up excluded).
	Runs map[string][]*load.Result `json:"runs"`
	// Warmup maps a system to its discarded warm-up round.
	Warmup map[string]*load.Result `json:"warmup,omitempty"`
}

// Memory is one system's footprint after loading Keys keys.
type Memory struct {
	System    string        `json:"system"`
	Keys      int           `json:"keys"`
	ValueSize int           `json:"value_size"`
	RSS       int64         `json:"rss_bytes"`
	Disk      int64         `json:"disk_bytes"`
	Apparent  int64         `json:"disk_apparent_bytes"`
	LoadTime  time.Duration `json:"load_ns"`
	Error     string        `json:"error,omitempty"`
}

// Summary is the median over rounds of one workload on one system.
type Summary struct {
	Rounds     int
	Throughput float64
	P50, P90   time.Duration
	P99, P999  time.Duration
	Max        time.Duration
	Errors     int64
	// ServerCPU and ClientCPU are the CPU microseconds per operation
	// that the system's server processes and the load generator spent,
	// medians of the rounds that measured them; NaN if none did.
	ServerCPU, ClientCPU float64
	// Curve is the percentile curve of all rounds merged.
	Curve []time.Duration
	// Watch workloads only.
	Events          bool
	EventRate       float64
	EventsDelivered float64 // fraction of expected, over all rounds
	EventP99        time.Duration
	EventCurve      []time.Duration
}

// Summarize reduces a system's rounds to medians.
func Summarize(runs []*load.Result) Summary {
	s := Summary{Rounds: len(runs), ServerCPU: math.NaN(), ClientCPU: math.NaN()}
	if len(runs) == 0 {
		return s
	}
	pick := func(f func(r *load.Result) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	dur := func(f func(r *load.Result) time.Duration) time.Duration {
		return time.Duration(pick(func(r *load.Result) float64 { return float64(f(r)) }))
	}
	s.Throughput = pick(func(r *load.Result) float64 { return r.Ops.Throughput })
	s.P50 = dur(func(r *load.Result) time.Duration { return r.Ops.Latency.P50 })
	s.P90 = dur(func(r *load.Result) time.Duration { return r.Ops.Latency.P90 })
	s.P99 = dur(func(r *load.Result) time.Duration { return r.Ops.Latency.P99 })
	s.P999 = dur(func(r *load.Result) time.Duration { return r.Ops.Latency.P999 })
	s.Max = dur(func(r *load.Result) time.Duration { return r.Ops.Latency.Max })
	s.ServerCPU = medianCPU(runs, func(r *load.Result) *load.CPU { return r.ServerCPU })
	s.ClientCPU = medianCPU(runs, func(r *load.Result) *load.CPU { return r.ClientCPU })
	all, events := hist.New(), hist.New()
	var got, want int64
	for _, r := range runs {
		s.Errors += r.Errors
		if h := r.Histogram(); h != nil {
			all.Merge(h)
		}
		if r.Events != nil {
			s.Events = true
			got += r.Events.Count
			want += r.EventsExpected
			if h := r.EventHistogram(); h != nil {
				events.Merge(h)
			}
		}
	}
	s.Curve = all.Summarize().Curve
	if s.Curve == nil {
		// Results read back from JSON have no histograms: use the
		// median round's curve.
		s.Curve = runs[len(runs)/2].Ops.Latency.Curve
	}
	if s.Events {
		s.EventRate = pick(func(r *load.Result) float64 {
			if r.Events == nil {
				return 0
			}
			return r.Events.Throughput
		})
		s.EventP99 = dur(func(r *load.Result) time.Duration {
			if r.Events == nil {
				return 0
			}
			return r.Events.Latency.P99
		})
		if want > 0 {
			s.EventsDelivered = float64(got) / float64(want)
		}
		s.EventCurve = events.Summarize().Curve
		if s.EventCurve == nil {
			if ev := runs[len(runs)/2].Events; ev != nil {
				s.EventCurve = ev.Latency.Curve
			}
		}
	}
	return s
}

// medianCPU is the median CPU per operation of the rounds that measured
// it (results from before the figure existed have none), NaN if none did.
func medianCPU(runs []*load.Result, f func(r *load.Result) *load.CPU) float64 {
	var v []float64
	for _, r := range runs {
		if c := f(r); c != nil {
			v = append(v, c.MicrosPerOp)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	return median(v)
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Write writes report.md, results.json and the charts into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report dir: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	charts, err := r.writeCharts(dir)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	r.Markdown(&md, charts)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// systemsFor returns the report's systems that ran workload w, in order.
func (r *Report) systemsFor(w Workload) []string {
	var out []string
	for _, s := range r.Systems {
		if _, ok := w.Runs[s]; ok {
			out = append(out, s)
		}
	}
	return out
}

// writeCharts draws the throughput bars and one latency chart per workload,
// returning the file names in the order the markdown shows them.
func (r *Report) writeCharts(dir string) ([]string, error) {
	var names []string
	write := func(name string, draw func(io.Writer) error) error {
		var b bytes.Buffer
		if err := draw(&b); err != nil {
			return fmt.Errorf("draw %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		names = append(names, name)
		return nil
	}
	if len(r.Workloads) > 0 {
		groups := make([]string, len(r.Workloads))
		values := make([][]float64, len(r.Workloads))
		for i, w := range r.Workloads {
			groups[i] = w.Name
			values[i] = make([]float64, len(r.Systems))
			for j, s := range r.Systems {
				values[i][j] = -1
				if runs, ok := w.Runs[s]; ok && len(runs) > 0 {
					values[i][j] = Summarize(runs).Throughput
				}
			}
		}
		err := write("throughput.png", func(w io.Writer) error {
			return BarChart(w, "throughput, median of rounds", "ops/s", groups, r.Systems, values)
		})
		if err != nil {
			return nil, err
		}
	}
	for _, w := range r.Workloads {
		systems := r.systemsFor(w)
		curves := make([][]time.Duration, len(r.Systems))
		var events [][]time.Duration
		hasEvents := false
		for j, s := range r.Systems {
			if runs, ok := w.Runs[s]; ok && len(runs) > 0 {
				sum := Summarize(runs)
				curves[j] = sum.Curve
				events = append(events, sum.EventCurve)
				hasEvents = hasEvents || sum.Events
			} else {
				events = append(events, nil)
			}
		}
		if len(systems) == 0 {
			continue
		}
		err := write("latency-"+fileSafe(w.Name)+".png", func(out io.Writer) error {
			return LatencyChart(out, w.Name+": latency by percentile, all rounds", r.Systems, curves)
		})
		if err != nil {
			return nil, err
		}
		if hasEvents {
			err := write("delivery-"+fileSafe(w.Name)+".png", func(out io.Writer) error {
				return LatencyChart(out, w.Name+": watch event delivery latency", r.Systems, events)
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return names, nil
}

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// Read loads a report from the results.json that Write wrote, so that it
// can be rendered again. Its results carry percentile summaries but not
// full histograms: merged curves are replaced by the median round's.
func Read(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode report %s: %w", path, err)
	}
	return &r, nil
}
