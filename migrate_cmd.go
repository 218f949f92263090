package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/januskv/janus/internal/metrics"
	"github.com/januskv/janus/migrate"
)

const migrateUsage = `usage: janus migrate --from SOURCE --to TARGET [--follow | --cutover | --verify-only]

Copies a live ZooKeeper tree or etcd v3 keyspace into Janus (or out of it),
then compares source and target and prints every difference (exit status 1
if any).

With --follow it then keeps the target in step with the source (ZooKeeper
3.6+ through a persistent recursive watch, etcd through a watch) until
interrupted (SIGINT or SIGTERM), and then cuts over: it waits until the
target has caught up with the source, verifies, and exits 0 only if both
are equal at that moment. --cutover does the same without following: it
re-syncs an earlier copy, catches up and verifies. Stop the source's
writers before the cut-over.

  SOURCE  zk://host:port[,host:port...][/path]     a ZooKeeper ensemble (a subtree with /path)
          etcd://host:port[,host:port...][/prefix] an etcd v3 cluster (keys under a prefix)
  TARGET  zk://host:port    a Janus's ZooKeeper address: keeps ACLs
          etcd://host:port  a Janus's etcd address: data only (the only target for etcd sources)

Ephemeral znodes and leased etcd keys belong to live clients: they are
reported and skipped. /zookeeper is never copied.

`

// runMigrate is "janus migrate": it parses args and runs the migration
// until it finishes or, with --follow, until ctx ends.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("janus migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, migrateUsage)
		fs.PrintDefaults()
	}
	from := fs.String("from", "", "source: zk://host:port[/path] or etcd://host:port[/prefix]")
	to := fs.String("to", "", "target Janus: zk://host:port or etcd://host:port")
	follow := fs.Bool("follow", false, "after the copy, apply the source's changes until interrupted, then cut over")
	cutover := fs.Bool("cutover", false, "copy or re-sync, catch up with the source, verify, and exit 0 only if equal")
	statusEvery := fs.Duration("status-every", 10*time.Second, "while following, print the lag this often")
	dryRun := fs.Bool("dry-run", false, "write nothing; print what a copy would skip or change (ephemerals, leased keys, ACLs etcd cannot express, keys ZooKeeper cannot see)")
	verifyOnly := fs.Bool("verify-only", false, "copy nothing; compare source and target and print every difference")
	progressEvery := fs.Int("progress-every", 1000, "print a progress line every this many nodes")
	batch := fs.Int("batch", 64, "etcd puts per target transaction")
	dialTimeout := fs.Duration("dial-timeout", 10*time.Second, "how long to wait for each side to answer")
	listenMetrics := fs.String("listen-metrics", "", "host:port serving /metrics while following: events applied, lag in events and seconds, resyncs")
	var auth []migrate.Auth
	fs.Func("auth", "scheme:credentials to add to every ZooKeeper session (repeatable), e.g. digest:admin:secret; needed to copy digest ACLs", func(v string) error {
		a, err := migrate.ParseAuth(v)
		auth = append(auth, a)
		return err
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate: unexpected argument %q", fs.Arg(0))
	}
	if *from == "" || *to == "" {
		fs.Usage()
		return errors.New("migrate: --from and --to are required")
	}
	src, err := migrate.ParseEndpoint(*from)
	if err != nil {
		return fmt.Errorf("migrate: --from: %w", err)
	}
	dst, err := migrate.ParseEndpoint(*to)
	if err != nil {
		return fmt.Errorf("migrate: --to: %w", err)
	}
	if (*verifyOnly || *dryRun) && (*follow || *cutover) || *verifyOnly && *dryRun {
		return errors.New("migrate: --verify-only and --dry-run exclude each other and --follow or --cutover")
	}
	cfg := migrate.Config{
		From: src, To: dst, Follow: *follow, Cutover: *cutover, DryRun: *dryRun, StatusEvery: *statusEvery, Out: stdout,
		ProgressEvery: *progressEvery, BatchSize: *batch, DialTimeout: *dialTimeout, Auth: auth,
	}
	if *listenMetrics != "" {
		state := &migrate.FollowState{}
		cfg.State = state
		stop, err := serveFollowMetrics(*listenMetrics, state, stderr)
		if err != nil {
			return fmt.Errorf("migrate: --listen-metrics: %w", err)
		}
		defer stop()
	}
	if *verifyOnly {
		_, err = migrate.Verify(ctx, cfg)
	} else {
		_, err = migrate.Run(ctx, cfg)
	}
	return err
}

// serveFollowMetrics serves the follower's status as Prometheus metrics on
// addr until stop is called.
func serveFollowMetrics(addr string, state *migrate.FollowState, stderr io.Writer) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	reg := metrics.New()
	reg.WatchFollow(func() metrics.Follow {
		st := state.Status()
		return metrics.Follow{Applied: st.Applied, Pending: st.PendingEvents, Lag: st.Lag, Resyncs: st.Resyncs, CaughtUp: st.CaughtUp}
	})
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: httpReadHeaderTimeout}
	fmt.Fprintf(stderr, "janus migrate: metrics on http://%s/metrics\n", l.Addr())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	return func() {
		hs.Close()
		<-done
	}, nil
}
