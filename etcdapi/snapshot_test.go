package etcdapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/backup"
	"github.com/januskv/janus/core"
	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/server"
)

// fillForSnapshot writes enough to span several 32 KiB blobs, deletes a few
// keys again and returns what a restored copy must hold.
func fillForSnapshot(t *testing.T, c *clientv3.Client) map[string]string {
	t.Helper()
	ctx := testCtx(t)
	want := map[string]string{}
	for i := range 300 {
		k, v := fmt.Sprintf("snap/%04d", i), strings.Repeat(string(rune('a'+i%26)), 100+i*3)
		if _, err := c.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for i := 0; i < 300; i += 7 {
		k := fmt.Sprintf("snap/%04d", i)
		if _, err := c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		delete(want, k)
	}
	return want
}

// checkSnapshotFile checks what clientv3's SaveWithVersion checks, and more:
// the sha256 trailer is the digest of everything before it. It returns the
// content.
func checkSnapshotFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data)%512 != sha256.Size {
		t.Fatalf("snapshot of %d bytes: size mod 512 = %d, want %d", len(data), len(data)%512, sha256.Size)
	}
	content, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(content); !bytes.Equal(sum[:], trailer) {
		t.Fatalf("sha256 trailer %x, content digests to %x", trailer, sum)
	}
	return content
}

// restoreAndRead restores a saved snapshot (as janus snapshot restore
// does) into a new member and returns
// the keys under snap/ and the revision it serves.
func restoreAndRead(t *testing.T, path string) (map[string]string, int64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.RestoreFile(path, backup.RestoreConfig{DataDir: dir}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	m, err := server.OpenMember(server.MemberConfig{DataDir: dir})
	if err != nil {
		t.Fatalf("open restored member: %v", err)
	}
	defer m.Close()
	v, err := m.Read(testCtx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	got := map[string]string{}
	err = v.Range([]byte("snap/"), []byte("snap0"), func(n *core.Node) bool {
		got[string(n.Key)] = string(n.Value)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, v.Rev()
}

func sameKVs(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("restored %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("restored %s = %.20q..., want %.20q...", k, got[k], v)
		}
	}
}

// TestSnapshotEtcdctl saves a snapshot with the real etcdctl, which checks
// the size and trailer as it does against etcd, and restores the file into
// a new member.
func TestSnapshotEtcdctl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcdctl")
	}
	bin := testenv.EtcdctlPath(t)
	j := startJanus(t)
	want := fillForSnapshot(t, j.Client)
	rev := currentRev(t, j.Client)

	path := filepath.Join(t.TempDir(), "backup.db")
	out, err := exec.CommandContext(testCtx(t), bin, "--endpoints", j.Endpoint, "snapshot", "save", path).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl snapshot save: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Snapshot saved at "+path) {
		t.Fatalf("etcdctl snapshot save said %q", out)
	}
	content := checkSnapshotFile(t, path)
	if len(content) <= 2*32*1024 {
		t.Fatalf("snapshot of %d bytes does not span several blobs; write more", len(content))
	}
	got, gotRev := restoreAndRead(t, path)
	sameKVs(t, got, want)
	if gotRev != rev {
		t.Fatalf("restored member serves revision %d, want %d", gotRev, rev)
	}
}

// TestSnapshotClient reads the stream with clientv3 as etcd's own tests do:
// blobs then one digest, the stream consistent while writes go on.
func TestSnapshotClient(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	want := fillForSnapshot(t, j.Client)

	// Writes racing the snapshot must not tear it: it shows one revision.
	writeCtx, stopWrites := context.WithCancel(ctx)
	writes := make(chan error, 1)
	go func() {
		var err error
		for i := 0; writeCtx.Err() == nil; i++ {
			if _, err = j.Client.Put(writeCtx, fmt.Sprintf("other/%d", i), "x"); writeCtx.Err() != nil {
				err = nil
			}
			if err != nil {
				break
			}
		}
		writes <- err
	}()
	resp, err := j.Client.SnapshotWithVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(resp.Snapshot); err != nil {
		t.Fatal(err)
	}
	resp.Snapshot.Close()
	f.Close()
	stopWrites()
	if err := <-writes; err != nil {
		t.Fatalf("concurrent put: %v", err)
	}
	if resp.Version != "3.7.0" {
		t.Errorf("version %q, want etcd v3.7's storage version 3.7.0", resp.Version)
	}
	checkSnapshotFile(t, path)
	got, _ := restoreAndRead(t, path)
	sameKVs(t, got, want)
}

// backendOnly hides every method but core.Backend's.
type backendOnly struct{ core.Backend }

// TestSnapshotUnsupported: a backend that cannot take snapshots makes
// Snapshot fail cleanly rather than send a file nobody can use.
func TestSnapshotUnsupported(t *testing.T) {
	j := startJanus(t)
	srv := etcdapi.New(backendOnly{j.Member}, etcdapi.Config{})
	t.Cleanup(srv.Stop)
	c := serveOn(t, srv)
	resp, err := c.SnapshotWithVersion(testCtx(t))
	if err == nil {
		resp.Snapshot.Close()
		t.Fatal("snapshot of a backend without snapshots succeeded")
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("err = %v, want Unimplemented", err)
	}
}

func currentRev(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	resp, err := c.Get(testCtx(t), "health")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// serveOn serves srv on a loopback port and returns a client of it.
func serveOn(t *testing.T, srv *etcdapi.Server) *clientv3.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return newClient(t, "http://"+l.Addr().String())
}
