// Command bench drives load against etcd v3 and ZooKeeper endpoints and
// compares Janus with a real etcd and a real ZooKeeper on this machine.
//
//	go run ./bench run --workload put --endpoints 127.0.0.1:2379
//	go run ./bench run --workload create --endpoints 127.0.0.1:2181
//	go run ./bench compare --workloads put,create,getData --rounds 3
//	go run ./bench list
//
// run prints throughput, latency percentiles, errors and the load
// generator's CPU per operation as text (and JSON with --json); compare
// starts each system itself, runs the same workloads against each in turns,
// stops what it started, and writes a report directory of markdown, JSON
// and PNG charts, with the servers' CPU per operation. The server never
// imports this package.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/januskv/janus/bench/internal/load"
	"github.com/januskv/janus/bench/internal/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

const usage = `usage: bench <command> [flags]

commands:
  run       run one workload against running servers
  compare   start Janus, etcd and ZooKeeper here, run workloads against each in turns, write a report
  list      list the workloads
  render    write a report directory's markdown and charts again from its results.json
  ceiling   serve no-op etcd and ZooKeeper servers (compare starts one as the "ceiling" system)
Run "bench <command> --help" for a command's flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "compare":
		return compareCmd(ctx, args[1:], stdout, stderr)
	case "list":
		listWorkloads(stdout)
		return nil
	case "render":
		return renderCmd(args[1:], stdout, stderr)
	case "ceiling":
		return ceilingCmd(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func renderCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: bench render <report directory>")
	}
	dir := fs.Arg(0)
	r, err := report.Read(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	if err := r.Write(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report written to %s\n", filepath.Join(dir, "report.md"))
	return nil
}

func listWorkloads(w io.Writer) {
	for _, set := range []struct {
		proto string
		m     map[string]string
	}{{"etcd v3", load.EtcdWorkloads}, {"ZooKeeper", load.ZKWorkloads}} {
		fmt.Fprintf(w, "%s workloads (one operation is):\n", set.proto)
		names := make([]string, 0, len(set.m))
		for n := range set.m {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(w, "  %-12s %s\n", n, set.m[n])
		}
	}
}

// protocolOf says which protocol a workload speaks: etcd or zookeeper.
func protocolOf(workload string) (string, error) {
	if _, ok := load.EtcdWorkloads[workload]; ok {
		return "etcd", nil
	}
	if _, ok := load.ZKWorkloads[workload]; ok {
		return "zookeeper", nil
	}
	return "", fmt.Errorf("workload %q: %w (see bench list)", workload, load.ErrUnknownWorkload)
}

// loadFlags registers the workload options shared by run and compare.
func loadFlags(fs *flag.FlagSet, o *load.Options) {
	fs.IntVar(&o.Clients, "clients", 64, "concurrent clients issuing operations")
	fs.IntVar(&o.Conns, "conns", 8, "etcd connections or ZooKeeper sessions the clients share")
	fs.IntVar(&o.KeySize, "key-size", 16, "bytes in a key's last component")
	fs.IntVar(&o.ValueSize, "value-size", 256, "bytes in each written value")
	fs.IntVar(&o.KeySpace, "key-space", 10000, "distinct keys that writes and reads pick from (and children for getChildren)")
	fs.Int64Var(&o.Ops, "ops", 0, "total operations per run; 0 means run for --duration")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each run when --ops is 0")
	fs.Float64Var(&o.Rate, "rate", 0, "aggregate operations per second; 0 means as fast as answered")
	fs.Float64Var(&o.ReadRatio, "read-ratio", 0.9, "fraction of reads in mixed and zkmixed")
	fs.IntVar(&o.Watchers, "watchers", 1000, "watchers in watch and zkwatch")
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts load.Options
	loadFlags(fs, &opts)
	workload := fs.String("workload", "put", "workload to run (see bench list)")
	endpoints := fs.String("endpoints", "", "comma-separated server addresses: etcd client URLs or host:port, or ZooKeeper host:port (default the protocol's usual local port)")
	jsonOut := fs.String("json", "", "also write the result as JSON to this file (- for stdout)")
	prefix := fs.String("prefix", "", "key prefix or parent znode (default /bench/<time>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	proto, err := protocolOf(*workload)
	if err != nil {
		return err
	}
	opts.Prefix = *prefix
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("/bench/%d", time.Now().UnixNano())
	}
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		opts.Progress = stderr
	}
	eps := splitList(*endpoints)
	var w load.Workload
	switch proto {
	case "etcd":
		if len(eps) == 0 {
			eps = []string{"127.0.0.1:2379"}
		}
		w, err = load.NewEtcd(ctx, *workload, eps, opts)
	default:
		if len(eps) == 0 {
			eps = []string{"127.0.0.1:2181"}
		}
		w, err = load.NewZK(ctx, *workload, eps, opts)
	}
	if err != nil {
		return err
	}
	res, err := load.Run(ctx, *workload, w, opts)
	if cerr := w.Close(); err == nil && cerr != nil {
		slog.Warn("closing the workload's connections", "err", cerr)
	}
	if err != nil {
		return err
	}
	res.Target = strings.Join(eps, ",")
	printResult(stdout, res)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		b = append(b, '\n')
		if *jsonOut == "-" {
			_, err = stdout.Write(b)
		} else {
			err = os.WriteFile(*jsonOut, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("write JSON: %w", err)
		}
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d operations failed", res.Errors, res.Ops.Count)
	}
	return nil
}

func printResult(w io.Writer, r *load.Result) {
	l := r.Ops.Latency
	fmt.Fprintf(w, "%s against %s: %d clients over %d connections\n", r.Workload, r.Target, r.Clients, r.Conns)
	fmt.Fprintf(w, "  ops        %d in %s = %.0f ops/s, %d errors\n", r.Ops.Count, r.Elapsed.Round(time.Millisecond), r.Ops.Throughput, r.Errors)
	fmt.Fprintf(w, "  latency    p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", dur(l.P50), dur(l.P90), dur(l.P99), dur(l.P999), dur(l.Max))
	if r.Events != nil {
		e := r.Events.Latency
		fmt.Fprintf(w, "  events     %d of %d delivered (%.2f%%), %.0f events/s\n", r.Events.Count, r.EventsExpected,
			100*float64(r.Events.Count)/float64(max(r.EventsExpected, 1)), r.Events.Throughput)
		fmt.Fprintf(w, "  delivery   p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", dur(e.P50), dur(e.P90), dur(e.P99), dur(e.P999), dur(e.Max))
	}
	if c := r.ClientCPU; c != nil {
		fmt.Fprintf(w, "  cpu        load generator %.3f s = %.1f µs/op\n", c.Seconds, c.MicrosPerOp)
	}
	for _, e := range r.FirstErrors {
		fmt.Fprintf(w, "  error      %s\n", e)
	}
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
