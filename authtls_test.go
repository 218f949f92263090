package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClientCertificateNamesTheEtcdUser: under --client-cert-auth the
// common name of the client's certificate is the etcd user of a request
// without a token, as in etcd, so a user with no password acts through
// its certificate alone; a token, when there is one, wins.
func TestClientCertificateNamesTheEtcdUser(t *testing.T) {
	s := newTLSSetup(t) // the client certificate's CN is "alice"
	a := startInProcess(t, t.TempDir(), append(s.flags(), "--bcrypt-cost", "4")...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := func(user, password string) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, TLS: s.clientConfig(t, false), DialTimeout: 5 * time.Second, Username: user, Password: password})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	cert := client("", "")
	for _, step := range []func() error{
		func() error { _, err := cert.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := cert.UserGrantRole(ctx, "root", "root"); return err },
		func() error {
			_, err := cert.UserAddWithOptions(ctx, "alice", "", &clientv3.UserAddOptions{NoPassword: true})
			return err
		},
		func() error { _, err := cert.RoleAdd(ctx, "app"); return err },
		func() error {
			_, err := cert.RoleGrantPermission(ctx, "app", "/app/", clientv3.GetPrefixRangeEnd("/app/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cert.UserGrantRole(ctx, "alice", "app"); return err },
		func() error { _, err := cert.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("auth setup: %v", err)
		}
	}
	if _, err := cert.Put(ctx, "/app/x", "1"); err != nil {
		t.Fatalf("alice by certificate writing /app/x: %v", err)
	}
	if _, err := cert.Put(ctx, "/other", "1"); !errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) {
		t.Fatalf("alice by certificate writing /other: %v", err)
	}
	root := client("root", "rootpw")
	if _, err := root.Put(ctx, "/other", "1"); err != nil {
		t.Fatalf("root by token over alice's certificate: %v", err)
	}
}
