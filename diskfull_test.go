package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member whose data directory vanishes raises NOSPACE and keeps
// serving reads, and SIGTERM (ctx ending, as main's NotifyContext does)
// still stops it: before, Badger's Close waited for ever on a memtable
// flush it retried every second, and the process never exited.
func TestSIGTERMStopsAMemberWhoseDataDirVanished(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	// The deadline only keeps a broken build from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, sigterm := context.WithCancel(ctx)
	ready := make(chan Addrs, 1)
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(runCtx, []string{"--data-dir", dataDir, "--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, &syncWriter{w: &stderr}, ready)
	}()
	var addrs Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("server did not start: %v\n%s", err, stderr.String())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addrs.Etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := range 20 { // something in Badger's memtable for its Close to flush
		if _, err := cli.Put(ctx, fmt.Sprintf("/k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(dataDir, dataDir+".gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/refused", "v"); err == nil || !strings.Contains(err.Error(), "database space exceeded") {
		t.Fatalf("put with the data dir gone: %v, want NOSPACE's refusal", err)
	}
	if resp, err := cli.Get(ctx, "/k3"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read with the data dir gone: %v", err)
	}
	sigterm()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cannot flush") {
			t.Fatalf("run returned %v, want the store's report that Badger cannot flush", err)
		}
	case <-ctx.Done():
		t.Fatalf("the server did not stop after SIGTERM:\n%s", stderr.String())
	}
}
