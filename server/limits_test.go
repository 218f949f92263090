package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
)

// deepTxn is an etcd Txn depth deep (the outermost counts as 1) whose
// innermost Txn puts key.
func deepTxn(ctx context.Context, kv clientv3.KV, depth int, key string) (*clientv3.TxnResponse, error) {
	op := clientv3.OpPut(key, "deep")
	for range depth - 1 {
		op = clientv3.OpTxn(nil, []clientv3.Op{op}, nil)
	}
	return kv.Txn(ctx).Then(op).Commit()
}

// deepTxnJSON is the same Txn as the JSON gateway takes it.
func deepTxnJSON(depth int, key string) []byte {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	var op any = map[string]any{"request_put": map[string]any{"key": b64(key), "value": b64("deep")}}
	for range depth - 1 {
		op = map[string]any{"request_txn": map[string]any{"success": []any{op}}}
	}
	body, _ := json.Marshal(map[string]any{"success": []any{op}})
	return body
}

// postText posts body as a web page could without a preflight (text/plain)
// and returns the status and body of the answer.
func postText(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("post %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func longKey(n int) string { return strings.Repeat("k", n) }

func longPath(n int) string { return "/" + strings.Repeat("p", n-1) }

// serving checks that j still takes a write and answers a read on both
// faces, tagging the keys with step.
func serving(t *testing.T, ctx context.Context, cli *clientv3.Client, zc *zk.Conn, step string) {
	t.Helper()
	if _, err := cli.Put(ctx, "after/"+step, step); err != nil {
		t.Fatalf("after %s: put: %v", step, err)
	}
	got, err := cli.Get(ctx, "after/"+step)
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != step {
		t.Fatalf("after %s: get: %v %v", step, got, err)
	}
	if _, err := zc.Create("/after-"+step, []byte(step), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("after %s: zk create: %v", step, err)
	}
	if data, _, err := zc.Get("/after-" + step); err != nil || string(data) != step {
		t.Fatalf("after %s: zk get: %q %v", step, data, err)
	}
}

// TestNoRequestStopsAMember sends, with the real clients, each request that
// used to be committed and then stop every member (a key or path of 65,000
// bytes or more, a Txn nested 66 deep, through gRPC and the JSON gateway),
// checks each is answered and the member keeps serving, and that it starts
// again on the same data.
func TestNoRequestStopsAMember(t *testing.T) {
	dir := t.TempDir()
	j := janustest.Start(t, janustest.Options{DataDir: dir})
	gw := httptest.NewServer(j.Etcd.GatewayHandler())
	defer gw.Close()
	cli := j.EtcdClient(t)
	zc, _ := j.ZKClient(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	keyTooLong := func(err error) bool {
		s, _ := status.FromError(err)
		return s.Code() == codes.InvalidArgument && strings.Contains(s.Message(), "key is too long")
	}
	for _, n := range []int{core.MaxKeyBytes + 1, 65000, 70000} {
		if _, err := cli.Put(ctx, longKey(n), "v"); !keyTooLong(err) {
			t.Fatalf("put of a %d-byte key: got %v, want InvalidArgument, key is too long", n, err)
		}
		serving(t, ctx, cli, zc, fmt.Sprintf("put-%d", n))
	}
	if _, err := cli.Put(ctx, longKey(core.MaxKeyBytes), "v"); err != nil {
		t.Fatalf("put of a key of MaxKeyBytes: %v", err)
	}
	// Reads and deletes of longer keys store nothing: they find nothing.
	if got, err := cli.Get(ctx, longKey(70000)); err != nil || len(got.Kvs) != 0 {
		t.Fatalf("get of a 70,000-byte key: %v %v", got, err)
	}
	if got, err := cli.Delete(ctx, longKey(70000)); err != nil || got.Deleted != 0 {
		t.Fatalf("delete of a 70,000-byte key: %v %v", got, err)
	}
	if ok, _, err := zc.Exists(longPath(70000)); err != nil || ok {
		t.Fatalf("exists of a 70,000-byte path: %v %v", ok, err)
	}
	// The longest key in a Txn etcd would take (the key only in the branch
	// that does not run) is refused too: the entry must apply either way.
	long := clientv3.OpPut(longKey(70000), "v")
	if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("x"), "=", 0)).Else(long).Commit(); !keyTooLong(err) {
		t.Fatalf("txn with a 70,000-byte key: got %v", err)
	}

	for _, depth := range []int{66, 100, 128} {
		if _, err := deepTxn(ctx, cli, depth, fmt.Sprintf("deep/%d", depth)); err != nil {
			t.Fatalf("txn %d deep: %v", depth, err)
		}
		serving(t, ctx, cli, zc, fmt.Sprintf("txn-%d", depth))
	}
	if _, err := deepTxn(ctx, cli, 129, "deep/129"); !errors.Is(rpctypes.Error(err), rpctypes.ErrTooManyOps) {
		t.Fatalf("txn 129 deep: got %v, want etcd's too many operations", err)
	}

	code, body := postText(t, gw.URL+"/v3/kv/txn", deepTxnJSON(70, "deep/gateway"))
	if code != http.StatusOK {
		t.Fatalf("gateway txn 70 deep: %d %s", code, body)
	}
	put, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(longKey(70000)))})
	if code, body := postText(t, gw.URL+"/v3/kv/put", put); code != http.StatusBadRequest || !strings.Contains(body, "key is too long") {
		t.Fatalf("gateway put of a 70,000-byte key: %d %.200s", code, body)
	}
	serving(t, ctx, cli, zc, "gateway")

	for _, n := range []int{core.MaxKeyBytes + 1, 65000, 65001, 70000} {
		if _, err := zc.Create(longPath(n), nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrBadArguments) {
			t.Fatalf("zk create of a %d-byte path: got %v, want bad arguments", n, err)
		}
		serving(t, ctx, cli, zc, fmt.Sprintf("zk-%d", n))
	}
	seqBase := longPath(core.MaxKeyBytes - 5)
	if _, err := zc.Create(seqBase, nil, zk.FlagSequence, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrBadArguments) {
		t.Fatalf("sequential create whose suffix makes the path too long: got %v", err)
	}
	if _, err := zc.Multi(&zk.CreateRequest{Path: "/m", Acl: zk.WorldACL(zk.PermAll)},
		&zk.CreateRequest{Path: longPath(70000), Acl: zk.WorldACL(zk.PermAll)}); !errors.Is(err, zk.ErrBadArguments) {
		t.Fatalf("multi with a 70,000-byte path: got %v", err)
	}
	if ok, _, _ := zc.Exists("/m"); ok {
		t.Fatal("the refused multi created /m")
	}
	if _, err := zc.Create(longPath(core.MaxKeyBytes), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("ephemeral create of a path of MaxKeyBytes: %v", err)
	}

	// The member starts again on what it wrote.
	zc.Close()
	j.Close()
	j = janustest.Start(t, janustest.Options{DataDir: dir})
	cli = j.EtcdClient(t)
	zc, _ = j.ZKClient(t, 10*time.Second)
	for _, k := range []string{"deep/66", "deep/128", "deep/gateway", "after/gateway", longKey(core.MaxKeyBytes)} {
		got, err := cli.Get(ctx, k)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatalf("after restart: get %.20s: %v %v", k, got, err)
		}
	}
	serving(t, ctx, cli, zc, "restart")
}

// TestLimitsAgainstRealEtcd sends the same requests to a real etcd v3.7.3
// and to Janus: deep Txns are answered alike; long keys are where Janus
// refuses what etcd takes (its keys live in bbolt values, Janus's are
// Badger keys).
func TestLimitsAgainstRealEtcd(t *testing.T) {
	real := testenv.StartEtcd(t)
	realCli := janustest.EtcdClient(t, strings.TrimPrefix(real.Endpoints[0], "http://"))
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	gw := httptest.NewServer(j.Etcd.GatewayHandler())
	defer gw.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	answer := func(err error) string {
		if err == nil {
			return "ok"
		}
		return rpctypes.ErrorDesc(err)
	}
	for _, depth := range []int{66, 128, 129, 200} {
		_, errEtcd := deepTxn(ctx, realCli, depth, "deep")
		_, errJanus := deepTxn(ctx, cli, depth, "deep")
		t.Logf("txn %d deep: etcd %q, Janus %q", depth, answer(errEtcd), answer(errJanus))
		if answer(errEtcd) != answer(errJanus) {
			t.Errorf("txn %d deep: etcd %q, Janus %q", depth, answer(errEtcd), answer(errJanus))
		}
	}
	for _, depth := range []int{66, 128, 129} {
		codeEtcd, bodyEtcd := postText(t, real.Endpoints[0]+"/v3/kv/txn", deepTxnJSON(depth, "gw"))
		codeJanus, bodyJanus := postText(t, gw.URL+"/v3/kv/txn", deepTxnJSON(depth, "gw"))
		t.Logf("gateway txn %d deep: etcd %d, Janus %d", depth, codeEtcd, codeJanus)
		if codeEtcd != codeJanus {
			t.Errorf("gateway txn %d deep: etcd %d %.200s, Janus %d %.200s", depth, codeEtcd, bodyEtcd, codeJanus, bodyJanus)
		}
	}
	for _, n := range []int{65000, 70000} {
		_, errEtcd := realCli.Put(ctx, longKey(n), "v")
		_, errJanus := cli.Put(ctx, longKey(n), "v")
		t.Logf("put of a %d-byte key: etcd %q, Janus %q", n, answer(errEtcd), answer(errJanus))
		if errEtcd != nil || errJanus == nil {
			t.Errorf("put of a %d-byte key: etcd %q, Janus %q; want etcd to take it and Janus to refuse it", n, answer(errEtcd), answer(errJanus))
		}
	}
}

// TestLongPathAgainstRealZooKeeper records what a real ZooKeeper 3.8
// answers for the paths Janus refuses: it takes them (it bounds a path only
// by jute.maxbuffer), where Janus answers BadArguments.
func TestLongPathAgainstRealZooKeeper(t *testing.T) {
	z := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	zc, _ := janustest.ZKClient(t, z.Addr, 10*time.Second)
	for _, n := range []int{65001, 70000} {
		_, err := zc.Create(longPath(n), nil, 0, zk.WorldACL(zk.PermAll))
		t.Logf("ZooKeeper create of a %d-byte path: %v", n, err)
		if err != nil {
			t.Errorf("ZooKeeper refused a %d-byte path (%v): Janus's BadArguments would then match it", n, err)
		}
	}
}
