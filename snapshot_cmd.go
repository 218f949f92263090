package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/januskv/janus/backup"
)

const snapshotUsage = `usage: janus snapshot restore FILE --data-dir DIR [--skip-hash-check]
       janus snapshot restore --from-zk-datadir ZKDIR --data-dir DIR

Fills a new Janus data directory from a backup, offline:

  FILE   a file saved by etcdctl snapshot save, from Janus or from etcd
         (its sha256 trailer is checked as etcdutl does), or a Janus
         snapshot; an etcd backend file copied from member/snap/db needs
         --skip-hash-check
  ZKDIR  a ZooKeeper data directory (the version-2 directory holding
         snapshot.N and log.N files, or its parent); stop ZooKeeper first

For a cluster, run the same restore from the same file on every member's
data directory, then start each member with its usual --id and --peers:
every member starts from the same state at the same log position.

`

// runSnapshot is "janus snapshot": today only "restore".
func runSnapshot(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "restore" {
		fmt.Fprint(stderr, snapshotUsage)
		return errors.New("snapshot: the only subcommand is restore")
	}
	fs := flag.NewFlagSet("janus snapshot restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, snapshotUsage)
		fs.PrintDefaults()
	}
	dataDir := fs.String("data-dir", "", "the new member's data directory (must not exist or be empty)")
	skipHash := fs.Bool("skip-hash-check", false, "restore a file whose sha256 trailer is missing or wrong")
	zkDir := fs.String("from-zk-datadir", "", "restore a ZooKeeper data directory instead of a file")
	// FILE may come before or after the flags.
	var files []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if *dataDir == "" {
		fs.Usage()
		return errors.New("snapshot restore: --data-dir is required")
	}
	if (len(files) == 1) == (*zkDir != "") || len(files) > 1 {
		fs.Usage()
		return errors.New("snapshot restore: give one FILE or --from-zk-datadir")
	}
	cfg := backup.RestoreConfig{
		DataDir:       *dataDir,
		SkipHashCheck: *skipHash,
		Logger:        slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	var sum backup.Summary
	var err error
	if *zkDir != "" {
		sum, err = backup.RestoreZooKeeper(*zkDir, cfg)
	} else {
		sum, err = backup.RestoreFile(files[0], cfg)
	}
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	fmt.Fprintf(stdout, "restored a %s backup into %s: revision %d, %d keys, %d leases\n",
		sum.Format, *dataDir, sum.Rev, sum.Keys, sum.Leases)
	return nil
}
