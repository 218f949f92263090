package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// TestAuthAcrossMembers: the auth store is replicated and tokens are
// self-contained, so users and roles set up through one member, and a
// token one member issued, act on every member; a revocation made through
// a second member stops the token on the third, for reads and writes.
func TestAuthAcrossMembers(t *testing.T) {
	c := Start(t, Options{Binary: binary, Nodes: 3, Args: []string{"--bcrypt-cost", "4"}})
	mustLeader(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := func(i int, user string) *clientv3.Client {
		cfg := clientv3.Config{Endpoints: []string{c.Nodes[i].EtcdAddr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
		if user != "" {
			cfg.Username, cfg.Password = user, user+"pw"
		}
		cl, err := clientv3.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	admin := client(0, "")
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "app"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "app", "/app/", clientv3.GetPrefixRangeEnd("/app/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserGrantRole(ctx, "alice", "app"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("auth setup through member 0: %v", err)
		}
	}
	// A token from member 0, used as is on members 1 and 2.
	resp, err := admin.Authenticate(ctx, "alice", "alicepw")
	if err != nil {
		t.Fatal(err)
	}
	kvOf := func(i int) pb.KVClient {
		conn, err := grpc.NewClient(c.Nodes[i].EtcdAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pb.NewKVClient(conn)
	}
	tokenCtx := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, resp.Token)
	is := func(err, want error) bool { return errors.Is(rpctypes.Error(err), rpctypes.Error(want)) }
	for i := 1; i < 3; i++ {
		kv := kvOf(i)
		if _, err := kv.Put(tokenCtx, &pb.PutRequest{Key: []byte("/app/x"), Value: []byte("1")}); err != nil {
			t.Fatalf("member %d: put with member 0's token: %v", i, err)
		}
		if _, err := kv.Range(tokenCtx, &pb.RangeRequest{Key: []byte("/app/x")}); err != nil {
			t.Fatalf("member %d: range with member 0's token: %v", i, err)
		}
		if _, err := kv.Put(tokenCtx, &pb.PutRequest{Key: []byte("/other"), Value: []byte("1")}); !is(err, rpctypes.ErrGRPCPermissionDenied) {
			t.Fatalf("member %d: put outside alice's keys: %v", i, err)
		}
	}
	// Revoked through member 1; member 2 refuses the old token at once
	// for a linearizable read, and for a write.
	root1 := client(1, "root")
	if _, err := root1.RoleRevokePermission(ctx, "app", "/app/", clientv3.GetPrefixRangeEnd("/app/")); err != nil {
		t.Fatal(err)
	}
	kv2 := kvOf(2)
	if _, err := kv2.Range(tokenCtx, &pb.RangeRequest{Key: []byte("/app/x")}); !is(err, rpctypes.ErrGRPCAuthOldRevision) {
		t.Fatalf("member 2: linearizable range with a token from before the revocation: %v", err)
	}
	if _, err := kv2.Put(tokenCtx, &pb.PutRequest{Key: []byte("/app/x"), Value: []byte("2")}); !is(err, rpctypes.ErrGRPCAuthOldRevision) {
		t.Fatalf("member 2: put with a token from before the revocation: %v", err)
	}
	alice2 := client(2, "alice")
	if _, err := alice2.Get(ctx, "/app/x"); !is(err, rpctypes.ErrGRPCPermissionDenied) {
		t.Fatalf("member 2: alice after the revocation: %v", err)
	}
}
