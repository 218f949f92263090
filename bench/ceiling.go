package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/januskv/janus/bench/internal/ceiling"
)

// ceilingCmd serves the no-op etcd and ZooKeeper servers until ctx ends.
// compare runs it as a child process (the "ceiling" system), so its CPU is
// measured like any server's and it does not share the load generator's
// runtime.
func ceilingCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	etcdListen := fs.String("etcd-listen", "127.0.0.1:0", "address of the no-op etcd v3 KV server (empty: none)")
	zkListen := fs.String("zk-listen", "127.0.0.1:0", "address of the no-op ZooKeeper server (empty: none)")
	valueSize := fs.Int("value-size", 256, "bytes of the value every read returns")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := ceiling.Start(ceiling.Config{EtcdListen: *etcdListen, ZKListen: *zkListen, ValueSize: *valueSize, Logger: logger})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(stdout, "ceiling serving etcd on %s, ZooKeeper on %s\n", s.EtcdAddr, s.ZKAddr)
	<-ctx.Done()
	return nil
}
