package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Markdown writes the report as markdown; charts are the image files to
// link, relative to the report.
func (r *Report) Markdown(w io.Writer, charts []string) {
	fmt.Fprintf(w, "# %s\n\n", r.Title)
	fmt.Fprintf(w, "- started: %s\n", r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- machine: %s\n", r.Machine)
	if r.Revision != "" {
		fmt.Fprintf(w, "- Janus revision: %s\n", r.Revision)
	}
	fmt.Fprintf(w, "- systems: %s, %d node(s) each\n", strings.Join(r.Systems, ", "), r.Nodes)
	if len(r.Settings) > 0 {
		fmt.Fprintf(w, "- settings: `%s`\n", strings.Join(r.Settings, " "))
	}
	if len(r.LoadAvg) > 0 {
		fmt.Fprintf(w, "- load averages (1, 5, 15 min) at start and end: %s\n", strings.Join(r.LoadAvg, "; "))
	}
	if r.Command != "" {
		fmt.Fprintf(w, "\nCommand:\n\n```\n%s\n```\n", r.Command)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n> %s\n", n)
	}

	if len(r.Workloads) > 0 {
		fmt.Fprintf(w, "\n## Throughput and latency\n\n")
		fmt.Fprintf(w, "Medians over the measured rounds (the warm-up round is not counted); errors are summed. ")
		fmt.Fprintf(w, "Server CPU is the CPU time (user + system) the system's server processes spent during a round, ")
		fmt.Fprintf(w, "summed over its members (from /proc/<pid>/stat), divided by the round's operations; ")
		fmt.Fprintf(w, "load generator CPU is the same for the bench process itself (getrusage), whose clients share the machine's cores with the servers. ")
		fmt.Fprintf(w, "Where the servers and the load generator compete for a few cores, CPU per operation usually varies less between runs than throughput does, and helps explain it.\n\n")
		fmt.Fprintf(w, "| workload | system | rounds | ops/s | p50 | p90 | p99 | p99.9 | max | errors | server CPU µs/op | load generator CPU µs/op |\n")
		fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, wl := range r.Workloads {
			for _, s := range r.systemsFor(wl) {
				m := Summarize(wl.Runs[s])
				fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n",
					wl.Name, s, m.Rounds, rate(m.Throughput), ms(m.P50), ms(m.P90), ms(m.P99), ms(m.P999), ms(m.Max), m.Errors,
					micros(m.ServerCPU), micros(m.ClientCPU))
			}
		}
		r.watchTable(w)
		r.ratioTable(w)
	}

	if len(r.Memory) > 0 {
		fmt.Fprintf(w, "\n## Memory and disk\n\n")
		fmt.Fprintf(w, "Each system freshly started, then loaded with distinct keys (etcd API for Janus and etcd, create for ZooKeeper); ")
		fmt.Fprintf(w, "RSS is VmRSS of the server process(es); disk is what du counts in the data directories (preallocated log segments included).\n\n")
		fmt.Fprintf(w, "| system | keys | value bytes | RSS | disk (du) | disk (apparent) | load time | note |\n")
		fmt.Fprintf(w, "|---|--:|--:|--:|--:|--:|--:|---|\n")
		for _, m := range r.Memory {
			fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s |\n",
				m.System, m.Keys, m.ValueSize, mib(m.RSS), mib(m.Disk), mib(m.Apparent), m.LoadTime.Round(100*time.Millisecond), m.Error)
		}
	}

	if len(charts) > 0 {
		fmt.Fprintf(w, "\n## Charts\n\n")
		for _, c := range charts {
			fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(c, ".png"), c)
		}
	}
}

func (r *Report) watchTable(w io.Writer) {
	header := false
	for _, wl := range r.Workloads {
		for _, s := range r.systemsFor(wl) {
			m := Summarize(wl.Runs[s])
			if !m.Events {
				continue
			}
			if !header {
				fmt.Fprintf(w, "\n### Watch delivery\n\n")
				fmt.Fprintf(w, "| workload | system | events/s | delivered | delivery p99 |\n|---|---|--:|--:|--:|\n")
				header = true
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.2f%% | %s |\n", wl.Name, s, rate(m.EventRate), 100*m.EventsDelivered, ms(m.EventP99))
		}
	}
}

// Ceiling names the system of no-op servers that answer every request at
// once: the wire's ceiling on the machine, which the ratio table divides
// by.
const Ceiling = "ceiling"

// ratioTable compares Janus with each other system on the workloads both
// ran: throughput ratios above 1 and latency ratios below 1 favour Janus.
// Where the ceiling ran the workload too, the last columns give each
// system's throughput as a fraction of the ceiling's.
func (r *Report) ratioTable(w io.Writer) {
	const us = "janus"
	var others []string
	for _, s := range r.Systems {
		if s != us && s != Ceiling {
			others = append(others, s)
		}
	}
	header := false
	for _, wl := range r.Workloads {
		mine, ok := wl.Runs[us]
		if !ok || len(mine) == 0 {
			continue
		}
		a := Summarize(mine)
		ofCeiling := func(Summary) string { return "-" }
		if runs := wl.Runs[Ceiling]; len(runs) > 0 {
			c := Summarize(runs)
			ofCeiling = func(m Summary) string { return fraction(m.Throughput, c.Throughput) }
		}
		rows := 0
		for _, o := range others {
			theirs, ok := wl.Runs[o]
			if !ok || len(theirs) == 0 {
				continue
			}
			b := Summarize(theirs)
			if !header {
				r.ratioHeader(w)
				header = true
			}
			evRate, evP99 := "", ""
			if a.Events && b.Events {
				evRate, evP99 = ratio(a.EventRate, b.EventRate), ratio(float64(a.EventP99), float64(b.EventP99))
			}
			cpu := "-"
			if !math.IsNaN(a.ServerCPU) && !math.IsNaN(b.ServerCPU) {
				cpu = ratio(a.ServerCPU, b.ServerCPU)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", wl.Name, o,
				ratio(a.Throughput, b.Throughput), ratio(float64(a.P50), float64(b.P50)),
				ratio(float64(a.P99), float64(b.P99)), ratio(float64(a.P999), float64(b.P999)), evRate, evP99, cpu,
				ofCeiling(a), ofCeiling(b))
			rows++
		}
		if rows == 0 && len(wl.Runs[Ceiling]) > 0 {
			// Janus against the ceiling alone.
			if !header {
				r.ratioHeader(w)
				header = true
			}
			fmt.Fprintf(w, "| %s | - | - | - | - | - | | | - | %s | - |\n", wl.Name, ofCeiling(a))
		}
	}
}

func (r *Report) ratioHeader(w io.Writer) {
	fmt.Fprintf(w, "\n### Ratios\n\n")
	fmt.Fprintf(w, "Janus divided by the other system, from the medians above: throughput above 1.00, and latency and server CPU per operation below 1.00, favour Janus. ")
	fmt.Fprintf(w, "\"of ceiling\" is a system's throughput divided by the ceiling's (no-op servers for the same wire that answer every request at once, measured in the same rounds): what share of what this machine and the client library allow the system reaches.\n\n")
	fmt.Fprintf(w, "| workload | Janus / | ops/s | p50 | p99 | p99.9 | events/s | delivery p99 | server CPU/op ratio (Janus/other, lower is better) | Janus of ceiling | other of ceiling |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
}

// fraction formats a/b as a share, like 0.74; "n/a" if b is zero.
func fraction(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func rate(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// ms formats a latency in milliseconds with three significant digits.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

// micros formats a CPU time per operation in microseconds; "-" if it was
// not measured.
func micros(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
