package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
)

func TestMigrateCommandArguments(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "--from and --to are required"},
		{[]string{"--from", "zk://a:1"}, "--from and --to are required"},
		{[]string{"--from", "mysql://a:1", "--to", "etcd://b:2"}, "unknown scheme"},
		{[]string{"--from", "etcd://a:1", "--to", "zk://b:2"}, "needs an etcd target"},
		{[]string{"--from", "zk://a:1", "--to", "etcd://b:2", "--cutover", "--verify-only"}, "exclude each other"},
		{[]string{"--from", "etcd://a:1", "--to", "etcd://b:2", "--follow", "--verify-only"}, "exclude each other"},
		{[]string{"--from", "zk://a:1", "--to", "etcd://b:2", "extra"}, "unexpected argument"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		err := runMigrate(context.Background(), c.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("janus migrate %q: %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
}

// TestMigrateCommandCopiesEtcdIntoJanus runs the subcommand end to end: a
// real etcd source, a whole in-process Janus as the target.
func TestMigrateCommandCopiesEtcdIntoJanus(t *testing.T) {
	ref := testenv.StartEtcd(t)
	src := janustest.EtcdClient(t, strings.TrimPrefix(ref.Endpoints[0], "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range []string{"/cfg/a", "/cfg/b", "other"} {
		if _, err := src.Put(ctx, k, "v-"+k); err != nil {
			t.Fatal(err)
		}
	}
	a := startInProcess(t, t.TempDir())
	from := "etcd://" + strings.TrimPrefix(ref.Endpoints[0], "http://") + "/cfg/"
	var stdout, stderr bytes.Buffer
	if err := runMigrate(ctx, []string{"--from", from, "--to", "etcd://" + a.Etcd}, &stdout, &stderr); err != nil {
		t.Fatalf("janus migrate: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "copied 2 nodes") || !strings.Contains(stdout.String(), "no differences") {
		t.Errorf("output:\n%s", stdout.String())
	}
	// The target is then altered: --verify-only says so and fails.
	dst := janustest.EtcdClient(t, a.Etcd)
	if _, err := dst.Put(ctx, "/cfg/a", "changed"); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	err := runMigrate(ctx, []string{"--from", from, "--to", "etcd://" + a.Etcd, "--verify-only"}, &stdout, &stderr)
	if err == nil || !strings.Contains(stdout.String(), `DIFF value of "/cfg/a": source "v-/cfg/a", target "changed"`) {
		t.Errorf("verify of an altered target: %v\n%s", err, stdout.String())
	}
}

// TestMigrateLargeTree copies a wide tree from a real ZooKeeper into Janus
// with the migration in a process of its own, and reports its speed and
// peak memory. JANUS_MIGRATE_NODES sets the size (default 20,000; the
// figures in docs/migration.md are from JANUS_MIGRATE_NODES=1000000).
func TestMigrateLargeTree(t *testing.T) {
	n := 20_000
	if v := os.Getenv("JANUS_MIGRATE_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			t.Fatalf("JANUS_MIGRATE_NODES=%q: want a number >= 1000", v)
		}
	}
	opts := testenv.ZKOptions{}
	if n > 200_000 {
		opts.JVMFlags = []string{"-Xmx3g"}
	}
	ref := testenv.StartZooKeeper(t, opts)
	src, _ := janustest.ZKClient(t, ref.Addr, 30*time.Second)
	const fanout = 1000
	open := zk.WorldACL(zk.PermAll)
	if _, err := src.Create("/big", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	data := []byte("0123456789abcdef0123456789abcdef")
	populated := time.Now()
	for d := 0; d*fanout < n; d++ {
		dir := fmt.Sprintf("/big/d%04d", d)
		ops := []any{&zk.CreateRequest{Path: dir, Data: data, Acl: open}}
		for i := 0; i < fanout-1 && d*fanout+i+1 < n; i++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("%s/n%04d", dir, i), Data: data, Acl: open})
		}
		if _, err := src.Multi(ops...); err != nil {
			t.Fatalf("populate %s: %v", dir, err)
		}
	}
	t.Logf("source populated with %d nodes in %v", n+1, time.Since(populated).Round(time.Millisecond))

	a := startInProcess(t, t.TempDir())
	args := fmt.Sprintf("--from zk://%s/big --to zk://%s --progress-every %d", ref.Addr, a.ZK, max(n/10, 1000))
	cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateHelperProcess$")
	cmd.Env = append(os.Environ(), "JANUS_MIGRATE_ARGS="+args)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	t.Logf("janus migrate %s:\n%s", args, out.String())
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	t.Logf("copied and verified %d nodes in %v: %.0f nodes/s; migrate process peak RSS %d MiB", n+1, elapsed.Round(time.Millisecond), float64(n+1)/elapsed.Seconds(), rss/1024)
	for _, want := range []string{"ETA", fmt.Sprintf("copied %d nodes", n+1), "no differences"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestMigrateHelperProcess is "janus migrate" in a child process for
// TestMigrateLargeTree; run alone it does nothing.
func TestMigrateHelperProcess(t *testing.T) {
	args := os.Getenv("JANUS_MIGRATE_ARGS")
	if args == "" {
		t.Skip("the child process of TestMigrateLargeTree")
	}
	if err := runMigrate(context.Background(), strings.Fields(args), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestMigrateFollowServesLagMetrics follows a real etcd into Janus with
// --listen-metrics and reads the follower's progress from /metrics while
// it runs.
func TestMigrateFollowServesLagMetrics(t *testing.T) {
	ref := testenv.StartEtcd(t)
	src := janustest.EtcdClient(t, strings.TrimPrefix(ref.Endpoints[0], "http://"))
	a := startInProcess(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := src.Put(ctx, "/m/before", "x"); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	from := "etcd://" + strings.TrimPrefix(ref.Endpoints[0], "http://") + "/m/"
	followCtx, stopFollow := context.WithCancel(ctx)
	done := make(chan error, 1)
	var stdout, stderr syncWriter
	stdout.w, stderr.w = &bytes.Buffer{}, &bytes.Buffer{}
	go func() {
		done <- runMigrate(followCtx, []string{"--from", from, "--to", "etcd://" + a.Etcd, "--follow", "--listen-metrics", addr}, &stdout, &stderr)
	}()
	const writes = 5
	applied := func() float64 {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"janus_migrate_lag_events", "janus_migrate_lag_seconds", "janus_migrate_resyncs_total", "janus_migrate_caught_up"} {
			if _, ok := fams[name]; !ok {
				t.Fatalf("/metrics has no %s", name)
			}
		}
		v, _ := value(fams, "janus_migrate_applied_events_total")
		return v
	}
	dst := janustest.EtcdClient(t, a.Etcd)
	// Once the copy is done (the first key is on the target), write to the
	// source and watch the follower's count move.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if r, err := dst.Get(ctx, "/m/before"); err == nil && len(r.Kvs) == 1 && applied() >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy did not finish:\n%s", stdout.String())
		}
	}
	for i := range writes {
		if _, err := src.Put(ctx, fmt.Sprintf("/m/k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(time.Minute); applied() < writes; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("janus_migrate_applied_events_total is %v after %d source writes", applied(), writes)
		}
	}
	stopFollow()
	if err := <-done; err != nil {
		t.Fatalf("follow and cut-over: %v\n%s%s", err, stdout.String(), stderr.String())
	}
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
