package etcdapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"

	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/server"
)

// cheapHashes keeps bcrypt's cost at its minimum: the tests hash many
// passwords on a busy machine.
func cheapHashes(_ *server.MemberConfig, c *etcdapi.Config) { c.BcryptCost = bcrypt.MinCost }

func userClient(t testing.TB, endpoint, user, password string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		Username: user, Password: password,
	})
	if err != nil {
		t.Fatalf("client for %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEtcdctlAuth sets up users and roles with the real etcdctl, enables
// auth, and checks permitted and refused operations with etcd's errors.
func TestEtcdctlAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcdctl")
	}
	bin := testenv.EtcdctlPath(t)
	j := startJanus(t, cheapHashes)
	exec1 := func(args ...string) (string, error) {
		cmd := exec.CommandContext(testCtx(t), bin, append([]string{"--endpoints", j.Endpoint, "--command-timeout", "30s"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ok := func(want string, args ...string) {
		t.Helper()
		out, err := exec1(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("etcdctl %s: %v\n%s(want %q)", strings.Join(args, " "), err, out, want)
		}
	}
	fails := func(want string, args ...string) {
		t.Helper()
		out, err := exec1(args...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("etcdctl %s: err %v, output %q, want an error with %q", strings.Join(args, " "), err, out, want)
		}
	}
	root := []string{"--user", "root:rootpw"}
	alice := []string{"--user", "alice:alicepw"}
	with := func(who []string, args ...string) []string { return append(append([]string(nil), who...), args...) }

	fails("etcdserver: root user does not exist", "auth", "enable")
	ok("User root created", "user", "add", "root:rootpw")
	ok("User alice created", "user", "add", "alice:alicepw")
	ok("Role app created", "role", "add", "app")
	ok("Role app updated", "role", "grant-permission", "app", "readwrite", "/app/", "--prefix")
	ok("Role app updated", "role", "grant-permission", "app", "read", "shared")
	ok("Role app updated", "role", "grant-permission", "app", "write", "w1", "w3")
	ok("Role app is granted to user alice", "user", "grant-role", "alice", "app")
	fails("etcdserver: user name already exists", "user", "add", "alice:x")
	fails("etcdserver: role name not found", "user", "grant-role", "alice", "nope")
	// etcdctl answers "root user does not have root role" by creating
	// the role and granting it, then enables auth.
	ok("Authentication Enabled", "auth", "enable")
	ok("root", with(root, "user", "get", "root")...)

	// Without a user, everything needing one is refused.
	fails("etcdserver: user name is empty", "get", "/app/x")
	fails("etcdserver: user name is empty", "put", "/app/x", "1")
	fails("etcdserver: authentication failed, invalid user ID or password", "--user", "alice:wrong", "get", "/app/x")

	ok("OK", with(alice, "put", "/app/x", "1")...)
	ok("/app/x\n1", with(alice, "get", "/app/", "--prefix")...)
	ok("OK", with(alice, "put", "w2", "v")...)
	fails("etcdserver: permission denied", with(alice, "get", "w2")...)
	fails("etcdserver: permission denied", with(alice, "put", "w3", "v")...)
	fails("etcdserver: permission denied", with(alice, "put", "shared", "v")...)
	ok("OK", with(root, "put", "shared", "s")...)
	ok("shared\ns", with(alice, "get", "shared")...)
	fails("etcdserver: permission denied", with(alice, "get", "/", "--prefix")...)
	fails("etcdserver: permission denied", with(alice, "del", "/app/", "--from-key")...)
	fails("etcdserver: permission denied", with(alice, "compaction", "2")...)
	fails("etcdserver: permission denied", with(alice, "defrag")...)
	fails("etcdserver: permission denied", with(alice, "user", "list")...)
	fails("etcdserver: permission denied", with(alice, "snapshot", "save", filepath.Join(t.TempDir(), "s.db"))...)
	ok("app", with(alice, "user", "get", "alice")...)
	fails("etcdserver: permission denied", with(alice, "user", "get", "root")...)
	ok("alice", with(root, "user", "list")...)
	ok("[/app/, /app0) (prefix /app/)", with(root, "role", "get", "app")...)

	// Revoking the role takes effect at once.
	ok("Role app is revoked from user alice", with(root, "user", "revoke-role", "alice", "app")...)
	fails("etcdserver: permission denied", with(alice, "get", "/app/x")...)
	fails("etcdserver: invalid auth management", with(root, "user", "delete", "root")...)
	ok("Authentication Disabled", with(root, "auth", "disable")...)
	ok("/app/x", "get", "/app/x")
}

// setupAuth creates root (with the root role) and alice (role app:
// readwrite on /app/ and read on shared) and enables auth, through
// client c.
func setupAuth(t *testing.T, c *clientv3.Client) {
	t.Helper()
	ctx := testCtx(t)
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := c.RoleAdd(ctx, "root"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := c.RoleAdd(ctx, "app"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "app", "/app/", clientv3.GetPrefixRangeEnd("/app/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, "app", "shared", "", clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserGrantRole(ctx, "alice", "app"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(rpctypes.Error(err), rpctypes.Error(want)) && (err == nil || !strings.Contains(err.Error(), rpctypes.ErrorDesc(want))) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// TestClientAuth uses clientv3 with a user name and password: Txn
// branches and compares, watches, leases, and a revocation that takes
// effect for a token issued before it.
func TestClientAuth(t *testing.T) {
	j := startJanus(t, cheapHashes)
	setupAuth(t, j.Client)
	ctx := testCtx(t)
	root := userClient(t, j.Endpoint, "root", "rootpw")
	alice := userClient(t, j.Endpoint, "alice", "alicepw")

	if _, err := root.Put(ctx, "secret", "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Put(ctx, "/app/a", "1"); err != nil {
		t.Fatal(err)
	}
	_, err := j.Client.Get(ctx, "/app/a")
	wantErr(t, "get without user", err, rpctypes.ErrGRPCUserEmpty)

	// A Txn needs read on every compare and the rights of both branches.
	_, err = alice.Txn(ctx).If(clientv3.Compare(clientv3.Value("secret"), "=", "s")).Then(clientv3.OpPut("/app/b", "1")).Commit()
	wantErr(t, "txn comparing secret", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.Txn(ctx).If(clientv3.Compare(clientv3.Value("/app/a"), "=", "1")).Then(clientv3.OpPut("/app/b", "1")).Else(clientv3.OpGet("secret")).Commit()
	wantErr(t, "txn reading secret in else", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.Txn(ctx).Then(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpDelete("secret")}, nil)).Commit()
	wantErr(t, "nested txn deleting secret", err, rpctypes.ErrGRPCPermissionDenied)
	if _, err := alice.Txn(ctx).If(clientv3.Compare(clientv3.Version("shared"), "=", 0)).Then(clientv3.OpPut("/app/b", "1")).Commit(); err != nil {
		t.Fatalf("permitted txn: %v", err)
	}
	if got, err := root.Get(ctx, "/app/b"); err != nil || len(got.Kvs) != 1 {
		t.Fatalf("txn wrote nothing: %v %v", got, err)
	}

	// A watch is checked when created.
	wch := alice.Watch(ctx, "secret")
	if r := <-wch; !r.Canceled || !strings.Contains(r.Err().Error(), "permission denied") {
		t.Fatalf("watch on secret: %+v %v", r, r.Err())
	}
	// A lease holding a key alice may not write is one she may not revoke.
	lease, err := root.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, "secret", "s", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	_, err = alice.Revoke(ctx, lease.ID)
	wantErr(t, "revoke a lease with secret", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.TimeToLive(ctx, lease.ID, clientv3.WithAttachedKeys())
	wantErr(t, "time to live of a lease with secret", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.Put(ctx, "/app/c", "1", clientv3.WithLease(lease.ID))
	wantErr(t, "attach to a lease with secret", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.UserAdd(ctx, "mallory", "pw")
	wantErr(t, "user add by alice", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.UserChangePassword(ctx, "root", "pw")
	wantErr(t, "root's password changed by alice", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.Compact(ctx, 2)
	wantErr(t, "compact", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = alice.Status(ctx, j.Endpoint)
	if err != nil {
		t.Fatalf("status with a user: %v", err)
	}
	_, err = j.Client.Status(ctx, j.Endpoint)
	wantErr(t, "status without user", err, rpctypes.ErrGRPCUserEmpty)

	// The lock service acts as its caller: alice may lock under /app/,
	// not elsewhere.
	lockc := v3lockpb.NewLockClient(alice.ActiveConnection())
	lockLease, err := alice.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("/app/lock"), Lease: int64(lockLease.ID)}); err != nil {
		t.Fatalf("alice locking /app/lock: %v", err)
	}
	_, err = lockc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("secret-lock"), Lease: int64(lockLease.ID)})
	wantErr(t, "alice locking secret-lock", err, rpctypes.ErrGRPCPermissionDenied)

	// A token issued before a change of the auth store no longer acts:
	// clientv3 would quietly authenticate again (and retry), so use a
	// plain gRPC connection.
	resp, err := j.Client.Authenticate(ctx, "alice", "alicepw")
	if err != nil {
		t.Fatal(err)
	}
	tokenCtx := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, resp.Token)
	conn, err := grpc.NewClient(strings.TrimPrefix(j.Endpoint, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	if _, err := kv.Range(tokenCtx, &pb.RangeRequest{Key: []byte("/app/a")}); err != nil {
		t.Fatalf("range with a fresh token: %v", err)
	}
	// A watcher alice opened while she could read /app/ ends at the
	// first event after the revocation, delivering nothing more.
	appWatch := alice.Watch(ctx, "/app/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if r := <-appWatch; !r.Created || r.Err() != nil {
		t.Fatalf("watch on /app/: %+v %v", r, r.Err())
	}
	if _, err := root.RoleRevokePermission(ctx, "app", "/app/", clientv3.GetPrefixRangeEnd("/app/")); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, "/app/after", "x"); err != nil {
		t.Fatal(err)
	}
	// clientv3 closes the channel of a watcher the server cancels.
	for r := range appWatch {
		if len(r.Events) > 0 || !r.Canceled {
			t.Fatalf("watch on /app/ after the revocation: %+v %v", r, r.Err())
		}
	}
	_, err = kv.Range(tokenCtx, &pb.RangeRequest{Key: []byte("/app/a")})
	wantErr(t, "range with a token from before the revocation", err, rpctypes.ErrGRPCAuthOldRevision)
	_, err = kv.Put(tokenCtx, &pb.PutRequest{Key: []byte("/app/a"), Value: []byte("2")})
	wantErr(t, "put with a token from before the revocation", err, rpctypes.ErrGRPCAuthOldRevision)
	// And with a fresh token the revoked permission is gone.
	_, err = alice.Get(ctx, "/app/a")
	wantErr(t, "get after the revocation", err, rpctypes.ErrGRPCPermissionDenied)
	_, err = kv.Range(metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, "forged.token"), &pb.RangeRequest{Key: []byte("shared")})
	wantErr(t, "forged token", err, rpctypes.ErrGRPCInvalidAuthToken)

	st, err := root.AuthStatus(ctx)
	if err != nil || !st.Enabled || st.AuthRevision == 0 {
		t.Fatalf("auth status %+v, %v", st, err)
	}
}

// TestJWTAuth issues etcd's JWT tokens signed with an ECDSA key, and
// refuses a token signed with another key.
func TestJWTAuth(t *testing.T) {
	dir := t.TempDir()
	priv, pub := writeECKey(t, dir, "a")
	tokens, err := etcdapi.NewTokenProvider("jwt,pub-key="+pub+",priv-key="+priv+",sign-method=ES256", 0)
	if err != nil {
		t.Fatal(err)
	}
	j := startJanus(t, cheapHashes, func(_ *server.MemberConfig, c *etcdapi.Config) { c.Tokens = tokens })
	setupAuth(t, j.Client)
	ctx := testCtx(t)
	alice := userClient(t, j.Endpoint, "alice", "alicepw")
	if _, err := alice.Put(ctx, "/app/a", "1"); err != nil {
		t.Fatalf("put with a JWT: %v", err)
	}
	resp, err := j.Client.Authenticate(ctx, "alice", "alicepw")
	if err != nil || strings.Count(resp.Token, ".") != 2 {
		t.Fatalf("authenticate: %v, response %v", err, resp)
	}
	_, err = etcdapi.NewTokenProvider("jwt,pub-key="+pub+",priv-key="+writeKeyOnly(t, dir)+",sign-method=ES256", 0)
	if err == nil {
		t.Fatal("a mismatched key pair was accepted")
	}
	if _, err := etcdapi.NewTokenProvider("jwt,sign-method=none", 0); err == nil {
		t.Fatal("sign-method none was accepted")
	}
}

func writeECKey(t *testing.T, dir, name string) (privPath, pubPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	privPath, pubPath = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(privPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return privPath, pubPath
}

func writeKeyOnly(t *testing.T, dir string) string {
	priv, _ := writeECKey(t, dir, "other")
	return priv
}
