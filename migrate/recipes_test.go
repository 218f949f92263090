package migrate_test

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
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

// worker returns the command of one recipe user: connect string, recipe
// path, worker id, referee file, rounds.
type worker func(ctx context.Context, t *testing.T, args ...string) *exec.Cmd

func kazooLock(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	return testenv.PythonCommand(ctx, t, kazooLockWorker, args...)
}

func curatorLatch(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	return testenv.JavaCommand(ctx, t, "testdata/CuratorLatchWorker.java", "CuratorLatchWorker", args...)
}

// lockRound runs n recipe users against hosts at once, each taking the
// lock (or leadership) rounds times, and returns the sequence numbers of
// the nodes they held it with, in the order printed.
func lockRound(t *testing.T, run worker, hosts, path, referee string, n, rounds int) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = run(ctx, t, hosts, path, "w"+strconv.Itoa(i), referee, strconv.Itoa(rounds))
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

// TestRecipesMoveToJanus moves a kazoo Lock's and a Curator LeaderLatch's
// users from a real ZooKeeper to Janus by the runbook: follow, stop the
// recipe's users, cut over, start them on Janus. A referee file that only
// one holder may own checks mutual exclusion throughout. The recipes'
// nodes (ephemeral) are not copied; the users re-create them on Janus.
// Their sequence numbers, a recipe's usual fencing token, start again on
// Janus: the test pins that down, as docs/migration.md says.
func TestRecipesMoveToJanus(t *testing.T) {
	cases := []struct {
		name, path string
		run        worker
		need       func(testing.TB)
		// container: the recipe makes its parent a container, which
		// the source's reaper deletes once the users have left.
		container bool
	}{
		{"kazoo Lock", "/app/lock", kazooLock, func(t testing.TB) { testenv.Python3Kazoo(t) }, false},
		{"Curator LeaderLatch", "/app/latch", curatorLatch, func(t testing.TB) { testenv.CuratorClasspath(t) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.need(t)
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

			before := lockRound(t, c.run, ref.Addr, c.path, referee, 3, 10)
			if c.container {
				// The runbook stops every writer before the cut-over, and
				// the source's container reaper is one: were it to delete
				// the emptied parent while the tool compares the two
				// trees, the tool would rightly call the cut-over unsafe.
				waitGone(t, src, c.path)
			}
			cutover()
			res := <-done
			t.Logf("output:\n%s", out.String())
			if res.err != nil {
				t.Fatalf("cut-over: %v", res.err)
			}
			dst, _ := j.ZKClient(t, 10*time.Second)
			// Curator makes the latch's parent a container, which the
			// source may have reaped once its users left: absent or
			// empty, but none of the recipe's nodes.
			kids, _, err := dst.Children(c.path)
			if err != nil && !errors.Is(err, zk.ErrNoNode) || len(kids) != 0 {
				t.Fatalf("target %s children %q, %v: want none of the recipe's nodes", c.path, kids, err)
			}

			after := lockRound(t, c.run, j.ZKAddr, c.path, referee, 3, 10)
			t.Logf("sequence numbers on ZooKeeper %v, then on Janus %v", before, after)
			if slices.Min(after) > slices.Max(before) {
				t.Errorf("sequence numbers kept increasing across the move (%d after %d): update docs/migration.md's fencing table", slices.Min(after), slices.Max(before))
			}
		})
	}
}

// waitGone waits until path no longer exists on c.
func waitGone(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, _, err := c.Exists(path)
		if err != nil {
			t.Fatalf("exists %s: %v", path, err)
		}
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists a minute after its users left", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
