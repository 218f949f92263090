package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/janustest"
)

// healthWant is what every health endpoint should say in one state.
type healthWant struct {
	health     int    // /health status code
	healthBody string // /health body, exactly, or its start if prefix
	serialBody string // /health?serializable=true body, the same way
	prefix     bool
	livez      int
	readyz     int
	readyzBody string // a line /readyz?verbose must hold
	grpc       healthpb.HealthCheckResponse_ServingStatus
	ruok       string
	srvr       string // a prefix of srvr's answer (stat and mntr say the same when not serving)
	// mntrServes: mntr answers although srvr does not (a running member
	// that a CORRUPT alarm names still reports its alarm to monitoring).
	mntrServes bool
	isro       string
	etcdPutErr error // what a put through the etcd face fails with (nil: it succeeds)
}

const zkNotServing = "This ZooKeeper instance is not currently serving requests\n"

// TestHealthTellsTheTruth starts a node in each state a member can be in
// and asks every health endpoint of both faces: a running single member,
// one stopped by an I/O failure while applying, one of a three-member
// ensemble started alone (no leader), and one with an alarm raised.
func TestHealthTellsTheTruth(t *testing.T) {
	healthy := healthWant{
		health: 200, healthBody: `{"health":"true","reason":""}`, serialBody: `{"health":"true","reason":""}`,
		livez: 200, readyz: 200, readyzBody: "[+]linearizable_read ok\n",
		grpc: healthpb.HealthCheckResponse_SERVING, ruok: "imok", srvr: "Zookeeper version: ", isro: "rw",
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, cfg *Config) (after func(t *testing.T, n *node))
		want  healthWant
	}{
		{"running", func(*testing.T, *Config) func(*testing.T, *node) { return nil }, healthy},
		{"stopped by an I/O failure", func(t *testing.T, cfg *Config) func(*testing.T, *node) {
			var armed atomic.Bool
			cfg.applyFault = func(uint64) error {
				if armed.Load() {
					return errors.New("injected I/O failure")
				}
				return nil
			}
			return func(t *testing.T, n *node) {
				armed.Store(true)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_, err := n.member.Propose(ctx, &core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("k"), Value: []byte("v")}}}})
				if err == nil {
					t.Fatal("a write succeeded through a failing apply")
				}
				<-n.member.Done()
				if n.member.Err() == nil {
					t.Fatal("member stopped without an error")
				}
			}
		}, healthWant{
			health:     503,
			healthBody: `{"health":"false","reason":"RANGE ERROR:member stopped: apply entries `,
			serialBody: `{"health":"false","reason":"RANGE ERROR:member stopped: apply entries `,
			prefix:     true,
			livez:      503, readyz: 503, readyzBody: "[-]serializable_read failed: member stopped: ",
			grpc: healthpb.HealthCheckResponse_NOT_SERVING, ruok: "", srvr: zkNotServing, isro: "null", etcdPutErr: rpctypes.ErrStopped,
		}},
		{"no leader", func(t *testing.T, cfg *Config) func(*testing.T, *node) {
			cfg.Peers = map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
			return nil
		}, healthWant{
			health: 503, healthBody: `{"health":"false","reason":"RAFT NO LEADER"}` + "\n",
			serialBody: `{"health":"true","reason":""}`,
			livez:      200, readyz: 503, readyzBody: "[-]linearizable_read failed: ",
			// ZooKeeper 3.8 out of quorum: ruok says imok (the process is
			// up), srvr/stat/mntr say it is not serving, isro says null.
			grpc: healthpb.HealthCheckResponse_NOT_SERVING, ruok: "imok", srvr: zkNotServing, isro: "null", etcdPutErr: rpctypes.ErrNoLeader,
		}},
		{"alarm raised", func(t *testing.T, cfg *Config) func(*testing.T, *node) {
			cfg.wrapBackend = func(b core.Backend) core.Backend { return alarmed{b, "CORRUPT"} }
			return nil
		}, healthWant{
			health: 503, healthBody: `{"health":"false","reason":"ALARM CORRUPT"}` + "\n",
			serialBody: `{"health":"false","reason":"ALARM CORRUPT"}` + "\n",
			livez:      200, readyz: 503, readyzBody: "[-]data_corruption failed: alarm activated: CORRUPT\n",
			grpc: healthpb.HealthCheckResponse_NOT_SERVING, ruok: "", srvr: zkNotServing, mntrServes: true, isro: "null",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			after := tc.setup(t, &cfg)
			n, err := startNode(cfg, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			if after != nil {
				after(t, n)
			}
			checkHealth(t, n.addrs, tc.want)
		})
	}
}

func TestHealthExcludesAnAlarm(t *testing.T) {
	cfg := testConfig(t)
	cfg.wrapBackend = func(b core.Backend) core.Backend { return alarmed{b, "NOSPACE"} }
	n, err := startNode(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	base := "http://" + n.addrs.HTTP
	for path, want := range map[string]string{
		"/health":                 `{"health":"false","reason":"ALARM NOSPACE"}` + "\n",
		"/health?exclude=NOSPACE": `{"health":"true","reason":""}`,
		"/health?exclude=CORRUPT": `{"health":"false","reason":"ALARM NOSPACE"}` + "\n",
		// etcd's readyz checks only the CORRUPT alarm.
		"/readyz?verbose":                          "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[+]non_learner ok\nok\n",
		"/readyz?exclude=linearizable_read":        "ok\n",
		"/readyz/linearizable_read?verbose":        "[+]linearizable_read ok\nok\n",
		"/livez?verbose&exclude=serializable_read": "ok\n",
	} {
		_, body := getURL(t, base+path)
		if body != want {
			t.Errorf("GET %s = %q, want %q", path, body, want)
		}
	}
	resp, err := http.Post(base+"/health", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /health: %d, want 405", resp.StatusCode)
	}
}

func checkHealth(t *testing.T, a Addrs, want healthWant) {
	t.Helper()
	base := "http://" + a.HTTP
	same := func(got, w string) bool { return got == w || want.prefix && strings.HasPrefix(got, w) }
	if code, body := getURL(t, base+"/health"); code != want.health || !same(body, want.healthBody) {
		t.Errorf("/health = %d %q, want %d %q", code, body, want.health, want.healthBody)
	}
	if _, body := getURL(t, base+"/health?serializable=true"); !same(body, want.serialBody) {
		t.Errorf("/health?serializable=true = %q, want %q", body, want.serialBody)
	}
	if code, body := getURL(t, base+"/livez?verbose"); code != want.livez {
		t.Errorf("/livez = %d %q, want %d", code, body, want.livez)
	}
	if code, body := getURL(t, base+"/readyz?verbose"); code != want.readyz || !strings.Contains(body, want.readyzBody) {
		t.Errorf("/readyz?verbose = %d %q, want %d with %q", code, body, want.readyz, want.readyzBody)
	}

	conn, err := grpc.NewClient(a.Etcd, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("grpc health check: %v", err)
	}
	if resp.Status != want.grpc {
		t.Errorf("grpc health = %v, want %v", resp.Status, want.grpc)
	}

	if got := fourLetter(t, a.ZK, "ruok"); got != want.ruok {
		t.Errorf("ruok = %q, want %q", got, want.ruok)
	}
	for _, w := range []string{"srvr", "stat", "mntr"} {
		wantPrefix := want.srvr
		if (wantPrefix != zkNotServing || want.mntrServes) && w == "mntr" {
			wantPrefix = "zk_version\t"
		}
		if got := fourLetter(t, a.ZK, w); !strings.HasPrefix(got, wantPrefix) || (wantPrefix == zkNotServing && got != zkNotServing) {
			t.Errorf("%s = %q, want %q", w, got, wantPrefix)
		}
	}
	if got := fourLetter(t, a.ZK, "isro"); got != want.isro {
		t.Errorf("isro = %q, want %q", got, want.isro)
	}
	// The AdminServer's ruok answers 200 only while the server serves.
	wantAdmin := http.StatusOK
	if want.srvr == zkNotServing {
		wantAdmin = http.StatusServiceUnavailable
	}
	if code, body := getURL(t, base+"/commands/ruok"); code != wantAdmin {
		t.Errorf("/commands/ruok = %d %s, want %d", code, body, wantAdmin)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	putCtx, putCancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer putCancel()
	_, err = cli.Put(putCtx, "health-probe", "x")
	if err != want.etcdPutErr && !errors.Is(err, want.etcdPutErr) {
		t.Errorf("etcd put: %v, want %v", err, want.etcdPutErr)
	}
}

// alarmed is a backend with alarms raised: no flag raises one, and the
// alarms themselves are the corruption check's business.
type alarmed struct {
	core.Backend
	alarm string
}

func (a alarmed) Status() core.Status {
	st := a.Backend.Status()
	st.Alarms = append(st.Alarms, a.alarm)
	// As if the alarm named this member.
	st.Corrupt = st.Corrupt || a.alarm == "CORRUPT"
	return st
}

// testConfig is a node on free loopback ports, answering the four-letter
// words the health checks use (the default answers srvr only).
func testConfig(t *testing.T) Config {
	t.Helper()
	cfg, err := parseFlags([]string{"--data-dir", t.TempDir(), "--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--4lw-whitelist", "ruok,srvr,stat,mntr,isro"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("JANUS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func getURL(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// fourLetter sends a four-letter word and returns all the server says
// before it closes the connection.
func fourLetter(t *testing.T, addr, word string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("%s: %v", word, err)
	}
	return string(b)
}

// The child side of TestProcessExitsWhenItsMemberStops: a node whose
// applies all fail, so its member stops at the first write, which the
// child makes itself through the etcd face once the node is up.
func init() {
	if os.Getenv("JANUS_FAILING_DISK") == "" {
		return
	}
	cfg, err := parseFlags(os.Args[slices.Index(os.Args, "--")+1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	cfg.applyFault = func(uint64) error { return errors.New("injected I/O failure") }
	ready := make(chan Addrs, 1)
	go func() {
		a := <-ready
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, DialTimeout: 5 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = cli.Put(ctx, "/first-write", "fails") // the member stops applying it
	}()
	if err := serve(context.Background(), cfg, os.Stderr, ready); err != nil {
		fmt.Fprintln(os.Stderr, "janus:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestProcessExitsWhenItsMemberStops checks the process does what etcd
// does when it cannot write or apply: it exits non-zero, saying why,
// rather than stay up answering from a state that no longer follows the
// log.
func TestProcessExitsWhenItsMemberStops(t *testing.T) {
	// The deadline only keeps a broken build from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "--",
		"--data-dir", t.TempDir(), "--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "JANUS_FAILING_DISK=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("child ended with %v, want exit status 1\n%s", err, stderr.String())
	}
	for _, want := range []string{"member stopped; janus exits", "injected I/O failure"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, stderr.String())
		}
	}
}

// TestEveryPortSurvivesRunningOutOfFiles runs each port of a node out of
// file descriptors in turn, until its accept fails with EMFILE, then frees
// them: every port must log the burst and serve again. The ZooKeeper
// face's own test checks sessions; this one checks that the etcd gRPC and
// HTTP listeners are wrapped too.
func TestEveryPortSurvivesRunningOutOfFiles(t *testing.T) {
	logs := janustest.NewLogWaiter()
	n, err := startNode(testConfig(t), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, addr := range []string{n.addrs.Etcd, n.addrs.HTTP, n.addrs.ZK} {
		release := janustest.RunOutOfFiles(t, addr)
		logs.WaitFor(t, "accept failing; retrying with backoff until it works", "addr="+addr)
		release()
		// A client comes once the files are free.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s after the files came free: %v", addr, err)
		}
		logs.WaitFor(t, "accepting connections again", "addr="+addr)
		c.Close()
	}
	checkHealth(t, n.addrs, healthWant{
		health: 200, healthBody: `{"health":"true","reason":""}`, serialBody: `{"health":"true","reason":""}`,
		livez: 200, readyz: 200, readyzBody: "[+]linearizable_read ok\n",
		grpc: healthpb.HealthCheckResponse_SERVING, ruok: "imok", srvr: "Zookeeper version: ", isro: "rw",
	})
}

func TestProbe(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	ctx := context.Background()
	if err := runProbe(ctx, []string{"http://" + a.HTTP + "/livez"}); err != nil {
		t.Errorf("probe of a live member: %v", err)
	}
	if err := runProbe(ctx, []string{"http://" + a.HTTP + "/no-such-page"}); err == nil {
		t.Error("probe of a missing page succeeded")
	}
	if err := runProbe(ctx, nil); err == nil {
		t.Error("probe without a URL succeeded")
	}
}
