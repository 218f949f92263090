package migrate_test

import (
	"bytes"
	"context"
	_ "embed"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/migrate"
)

//go:embed testdata/kazoo_lock_worker.py
var kazooLockWorker string

// lockRound runs n kazoo Lock workers against hosts at once, each taking
// the lock rounds times, and returns the sequence numbers of the lock
// nodes they held, in the order printed.
func lockRound(t *testing.T, hosts, referee string, n, rounds int) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = testenv.PythonCommand(ctx, t, kazooLockWorker, hosts, "/app/lock", "w"+strconv.Itoa(i), referee, strconv.Itoa(rounds))
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []int
	for i, c := range cmds {
		err := c.Wait()
		if err != nil || strings.Contains(outs[i].String(), "VIOLATION") {
			t.Fatalf("lock worker %d: %v\n%s", i, err, outs[i].String())
		}
		for _, line := range strings.Split(strings.TrimSpace(outs[i].String()), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "held" {
				continue
			}
			seq, err := strconv.Atoi(f[2][len(f[2])-10:])
			if err != nil {
				t.Fatalf("lock node %q: %v", f[2], err)
			}
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) != n*rounds {
		t.Fatalf("%d acquisitions, want %d", len(seqs), n*rounds)
	}
	return seqs
}

// TestKazooLockMovesToJanus moves a kazoo Lock's users from a real
// ZooKeeper to Janus by the runbook: follow, stop the lock's users, cut
// over, start them on Janus. A referee file that only one holder may own
// checks mutual exclusion throughout. The lock nodes (ephemeral) are not
// copied; the users re-create them on Janus. Their sequence numbers, a
// recipe's usual fencing token, start again on Janus: the test pins that
// down, as docs/migration.md says.
func TestKazooLockMovesToJanus(t *testing.T) {
	testenv.Python3Kazoo(t)
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	src, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	if _, err := src.Create("/app", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	j := janustest.Start(t, janustest.Options{})
	referee := filepath.Join(t.TempDir(), "holder")

	var out syncBuffer
	runCtx, cutover := context.WithCancel(testCtx(t))
	defer cutover()
	done := runAsync(runCtx, migrate.Config{From: endpoint(t, "zk://"+ref.Addr), To: endpoint(t, "zk://"+j.ZKAddr), Out: &out, Follow: true})
	waitFor(t, &out, "following")

	before := lockRound(t, ref.Addr, referee, 3, 10)
	cutover()
	res := <-done
	t.Logf("output:\n%s", out.String())
	if res.err != nil {
		t.Fatalf("cut-over: %v", res.err)
	}
	dst, _ := j.ZKClient(t, 10*time.Second)
	kids, _, err := dst.Children("/app/lock")
	if err != nil || len(kids) != 0 {
		t.Fatalf("target /app/lock children %q, %v: want the lock's parent and no lock nodes", kids, err)
	}

	after := lockRound(t, j.ZKAddr, referee, 3, 10)
	t.Logf("lock node sequence numbers on ZooKeeper %v, then on Janus %v", before, after)
	if slices.Min(after) > slices.Max(before) {
		t.Errorf("sequence numbers kept increasing across the move (%d after %d): update docs/migration.md's fencing table", slices.Min(after), slices.Max(before))
	}
}
