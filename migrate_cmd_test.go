package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

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
