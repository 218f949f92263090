package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestAdminCommandsNeedRootUnderEtcdAuth runs a node answering every
// four-letter word, with a ZooKeeper session holding an ephemeral and a
// watch, then enables etcd auth: the words and admin commands that name
// sessions, client addresses or paths (cons, stat, dump, wchc, wchp, and
// the resets) stop answering anyone on the ZooKeeper port, and on the
// HTTP port answer only a request carrying an etcd root token; the ones
// that give counts and settings stay open.
func TestAdminCommandsNeedRootUnderEtcdAuth(t *testing.T) {
	a := startInProcess(t, t.TempDir(), "--4lw-whitelist", "*")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	zc, _, err := zk.Connect([]string{a.ZK}, 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if _, err := zc.Create("/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := zc.GetW("/eph"); err != nil {
		t.Fatal(err)
	}
	if got := fourLetter(t, a.ZK, "dump"); !strings.Contains(got, "/eph") {
		t.Fatalf("dump with auth off: %q", got)
	}

	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup: %v", err)
		}
	}
	token := func(user string) string {
		resp, err := pb.NewAuthClient(admin.ActiveConnection()).Authenticate(ctx, &pb.AuthenticateRequest{Name: user, Password: user + "pw"})
		if err != nil {
			t.Fatalf("authenticate %s: %v", user, err)
		}
		return resp.Token
	}
	rootToken, aliceToken := token("root"), token("alice")

	for _, w := range []string{"cons", "stat", "dump", "wchc", "wchp", "crst", "srst"} {
		got := fourLetter(t, a.ZK, w)
		if !strings.Contains(got, "not executed because etcd authentication is enabled") || strings.Contains(got, "/eph") || strings.Contains(got, "0x") {
			t.Errorf("%s with etcd auth on: %q", w, got)
		}
	}
	for _, w := range []string{"srvr", "mntr", "ruok", "wchs", "conf"} {
		if got := fourLetter(t, a.ZK, w); got == "" || strings.Contains(got, "not executed") {
			t.Errorf("%s with etcd auth on: %q, want its answer", w, got)
		}
	}

	get := func(path, auth string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.HTTP+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, cmd := range []string{"cons", "connections", "stat", "stats", "dump"} {
		for _, tc := range []struct {
			who, auth string
			want      int
		}{
			{"no one", "", http.StatusUnauthorized},
			{"a forged token", "forged.token", http.StatusUnauthorized},
			{"a user without the root role", aliceToken, http.StatusUnauthorized},
			{"root", rootToken, http.StatusOK},
			{"root, as a bearer token", "Bearer " + rootToken, http.StatusOK},
		} {
			code, body := get("/commands/"+cmd, tc.auth)
			if code != tc.want {
				t.Errorf("/commands/%s as %s: %d %s, want %d", cmd, tc.who, code, body, tc.want)
			}
			if code != http.StatusOK && strings.Contains(body, "/eph") {
				t.Errorf("/commands/%s as %s reveals the ephemeral: %s", cmd, tc.who, body)
			}
		}
	}
	if code, body := get("/commands/dump", rootToken); !strings.Contains(body, "/eph") {
		t.Errorf("/commands/dump as root: %d %s", code, body)
	}
	for _, cmd := range []string{"srvr", "mntr", "ruok", "wchs", "conf"} {
		if code, body := get("/commands/"+cmd, ""); code != http.StatusOK {
			t.Errorf("/commands/%s with etcd auth on: %d %s, want it open", cmd, code, body)
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
