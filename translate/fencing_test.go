package translate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/translate"
)

// runKazoo runs a kazoo script. It may be called from a goroutine other than
// the test's: it reports failure with t.Error, never t.Fatal.
func runKazoo(t *testing.T, script string, args ...string) string {
	python := testenv.Python3Kazoo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{"-c", script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("kazoo script: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}

// etcdMutexRounds takes the etcd concurrency.Mutex at lockPrefix n times on
// its own session, each time doing an unguarded read-modify-write of the
// counter key, and returns the fencing token of each acquisition.
func etcdMutexRounds(ctx context.Context, endpoint, lockPrefix, counter string, n int) ([]int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	defer s.Close()
	m := concurrency.NewMutex(s, lockPrefix)
	var tokens []int64
	for range n {
		if err := m.Lock(ctx); err != nil {
			return tokens, fmt.Errorf("lock: %w", err)
		}
		own, err := cli.Get(ctx, m.Key())
		if err != nil || len(own.Kvs) != 1 {
			return tokens, fmt.Errorf("own lock key %s: %v %v", m.Key(), own, err)
		}
		tokens = append(tokens, translate.FencingToken(own.Kvs[0]))
		resp, err := cli.Get(ctx, counter)
		if err != nil {
			return tokens, err
		}
		v := 0
		if len(resp.Kvs) == 1 {
			v, _ = strconv.Atoi(string(resp.Kvs[0].Value))
		}
		if _, err := cli.Put(ctx, counter, strconv.Itoa(v+1)); err != nil {
			return tokens, err
		}
		if err := m.Unlock(ctx); err != nil {
			return tokens, fmt.Errorf("unlock: %w", err)
		}
	}
	return tokens, nil
}

// fencedWrite is the resource side of the README's fencing example: the
// resource remembers the highest token it has accepted (key /fence, a
// zero-padded decimal so that etcd's byte-wise value compare orders it as a
// number) and refuses a write carrying a lower one. Tokens from etcd and
// ZooKeeper holders are revisions of the one counter, so they compare.
func fencedWrite(ctx context.Context, cli *clientv3.Client, token int64, value string) (accepted bool, err error) {
	tok := fmt.Sprintf("%020d", token)
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value("/fence"), ">", tok)).
		Else(clientv3.OpPut("/fence", tok), clientv3.OpPut("/resource", value)).
		Commit()
	if err != nil {
		return false, err
	}
	return !resp.Succeeded, nil
}

func TestFencingRejectsStaleHolder(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	ctx := testCtx(t)
	if _, err := cli.Put(ctx, "/fence", fmt.Sprintf("%020d", 0)); err != nil {
		t.Fatal(err)
	}

	// 1. An etcd holder takes the lock, then loses it: its lease is revoked
	// (as if it paused past its TTL) and a ZooKeeper client takes the
	// same resource's lock.
	s1, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	m1 := concurrency.NewMutex(s1, "/locks/resource")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	own, err := cli.Get(ctx, m1.Key())
	if err != nil {
		t.Fatal(err)
	}
	etcdToken := translate.FencingToken(own.Kvs[0])
	if ok, err := fencedWrite(ctx, cli, etcdToken, "etcd holder, while it holds"); err != nil || !ok {
		t.Fatalf("holder's write refused: %v %v", ok, err)
	}
	if _, err := cli.Revoke(ctx, s1.Lease()); err != nil {
		t.Fatal(err)
	}

	conn, events := j.ZKClient(t, 10*time.Second)
	if _, err := conn.Create("/zlocks", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	node, err := conn.Create("/zlocks/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, openACL)
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := conn.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	zkToken := translate.FencingTokenOfStat(coreStat(st))
	if zkToken <= etcdToken {
		t.Fatalf("later holder's token %d is not above the earlier's %d", zkToken, etcdToken)
	}
	if ok, err := fencedWrite(ctx, cli, zkToken, "zk holder"); err != nil || !ok {
		t.Fatalf("new holder's write refused: %v %v", ok, err)
	}

	// The stale etcd holder wakes up. Both fences stop it: the resource's
	// token check, and etcd's own ownership compare (Mutex.IsOwner: its
	// key still exists with the create revision it was given).
	if ok, err := fencedWrite(ctx, cli, etcdToken, "stale etcd holder"); err != nil || ok {
		t.Errorf("stale holder's write accepted (%v) or failed (%v)", ok, err)
	}
	txn, err := cli.Txn(ctx).If(m1.IsOwner()).Then(clientv3.OpPut("/resource", "stale via IsOwner")).Commit()
	if err != nil || txn.Succeeded {
		t.Errorf("stale etcd holder's IsOwner-guarded write: succeeded=%v err=%v", txn != nil && txn.Succeeded, err)
	}

	// 2. The ZooKeeper holder's session ends (an etcd revoke expires it)
	// and its client, reconnected on a new session, tries to write guarded
	// by a check op on its lock node.
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(translate.LeaseOfSession(conn.SessionID()))); err != nil {
		t.Fatal(err)
	}
	waitState(t, events, zk.StateExpired)
	waitState(t, events, zk.StateHasSession)
	_, err = conn.Multi(
		&zk.CheckVersionRequest{Path: node, Version: 0},
		&zk.SetDataRequest{Path: "/resource", Data: []byte("stale zk holder"), Version: -1},
	)
	if !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("stale ZooKeeper holder's checked write: %v, want ErrNoNode", err)
	}
	if ok, err := fencedWrite(ctx, cli, etcdToken, "stale etcd holder, again"); err != nil || ok {
		t.Errorf("stale token accepted (%v) or failed (%v)", ok, err)
	}
	got, err := cli.Get(ctx, "/resource")
	if err != nil || string(got.Kvs[0].Value) != "zk holder" {
		t.Errorf("resource %v %v, want the last valid holder's write", got, err)
	}
}
