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
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == "migrate" {
		err = runMigrate(ctx, os.Args[2:], os.Stdout, os.Stderr)
	} else {
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
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	n, err := startNode(cfg, logger)
	if err != nil {
		return err
	}
	logger.Info("janus started", "data_dir", cfg.DataDir, "etcd", n.addrs.Etcd, "zookeeper", n.addrs.ZK, "http", n.addrs.HTTP)
	if ready != nil {
		ready <- n.addrs
	}
	<-ctx.Done()
	logger.Info("janus stopping")
	return n.Close()
}
