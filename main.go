// Command janus runs a Janus server: one coordination service that speaks
// the etcd v3 API and the ZooKeeper client protocol over one replicated
// tree of nodes.
//
//	go run .                 # single node, data in ./janus-data
//	go run . --help          # flags
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"
)

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "migrate":
		err = runMigrate(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case len(os.Args) > 1 && os.Args[1] == "probe":
		err = runProbe(ctx, os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "snapshot":
		err = runSnapshot(os.Args[2:], os.Stdout, os.Stderr)
	default:
		err = run(ctx, os.Args[1:], os.Stderr, nil)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "janus: %v\n", err)
		os.Exit(1)
	}
}

// run parses args, starts the server and blocks until ctx ends. ready, if
// not nil, receives the bound addresses once every listener is up.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- Addrs) error {
	cfg, err := parseConfig(args, os.Environ(), stderr)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stderr, ready)
}

// serve runs a node with cfg until ctx ends, or until its member stops on
// a failure: then, as etcd does on a failed write or apply, it closes
// everything and returns the failure, and the process exits non-zero for
// its supervisor to restart it. A member that cannot apply the log must
// not keep answering from a state that no longer follows it.
func serve(ctx context.Context, cfg Config, stderr io.Writer, ready chan<- Addrs) error {
	logger := newLogger(stderr, cfg)
	n, err := startNode(cfg, logger)
	if err != nil {
		return err
	}
	go releaseWhenQuiet(ctx, quietCheckEvery)
	logger.Info("janus started", "data_dir", cfg.DataDir, "etcd", n.addrs.Etcd, "zookeeper", n.addrs.ZK, "zookeeper_tls", n.addrs.ZKSecure, "http", n.addrs.HTTP, "client_tls", cfg.ClientTLS.Enabled() || cfg.AutoTLS, "peer_tls", cfg.PeerTLS.Enabled() || cfg.PeerAutoTLS)
	if ready != nil {
		ready <- n.addrs
	}
	select {
	case <-ctx.Done():
		logger.Info("janus stopping")
		return n.Close()
	case <-n.member.Done():
		failure := n.member.Err()
		logger.Error("member stopped; janus exits", "err", failure)
		return errors.Join(fmt.Errorf("member stopped: %w", failure), n.Close())
	}
}

const (
	// defaultGCPercent is the collector's GOGC unless the environment sets
	// one: the heap may grow by half its live data between collections
	// instead of doubling. The live heap is mostly Badger's byte buffers,
	// cheap to mark, so collecting twice as often cost about 1% of CPU in
	// a 1M-key load and lowered its peak RSS by about a fifth.
	defaultGCPercent = 50
	// quietCheckEvery is how often releaseWhenQuiet looks at the heap.
	quietCheckEvery = 5 * time.Second
	// quietAllocBytes is the most the process may allocate between two
	// looks and still count as quiet.
	quietAllocBytes = 16 << 20
	// burstAllocBytes is how much must have been allocated since the last
	// release for another one to be worth it.
	burstAllocBytes = 64 << 20
)

// releaseWhenQuiet gives the Go heap's garbage and free pages back to the
// operating system once the process goes quiet after a burst of work, and
// checks every period until ctx ends.
//
// The collector sizes the heap for the live data it found at its last
// cycle (GOGC), and returns free pages only down to that size. After a
// burst, a bulk load say, the last cycle ran while Badger's compactions
// held their table builders, so the process keeps hundreds of MiB of
// garbage and free pages for a heap that is now a fraction of that, until
// the runtime's forced collection two minutes later and its slow return of
// pages after it. Badger also frees the builders it pools one every two
// seconds once they stop being used, which the collector sees only at its
// next cycle. So, when little was allocated since the last look and much
// since the last release, or the last release freed a lot (pooled
// builders may still be coming free), this collects and returns what is
// free at once. A busy process never gets here; an idle one does nothing
// after the releases stop freeing memory.
func releaseWhenQuiet(ctx context.Context, period time.Duration) {
	s := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	read := func() (allocs, retained uint64) {
		metrics.Read(s)
		return s[0].Value.Uint64(), s[1].Value.Uint64() - s[2].Value.Uint64()
	}
	last, _ := read()
	released, freed := last, uint64(0)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		allocs, before := read()
		sinceLook := allocs - last
		last = allocs
		if !worthReleasing(sinceLook, allocs-released, freed) {
			continue
		}
		debug.FreeOSMemory()
		allocs, after := read()
		freed = 0
		if before > after {
			freed = before - after
		}
		last, released = allocs, allocs
	}
}

// worthReleasing decides, from what was allocated since the last look and
// since the last release and what the last release freed, whether to
// release now: only when the process is quiet, and only after a burst or
// while releases still free a lot.
func worthReleasing(sinceLook, sinceRelease, lastFreed uint64) bool {
	if sinceLook >= quietAllocBytes {
		return false
	}
	return sinceRelease >= burstAllocBytes || lastFreed >= burstAllocBytes/4
}
