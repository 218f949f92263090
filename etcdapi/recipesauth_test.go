package etcdapi_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/internal/testenv"
)

// TestLockElectionAuthErrorsAgainstEtcd calls the Lock and Election
// services of a real etcd v3.7.3 and of Janus, with the same users and
// permissions and auth on, as users who may not touch the names used, and
// and as no user at all: the gRPC code and message
// of every refusal must be etcd's. etcd runs these services as in-process
// clients of its own KV API, so a refusal reaches the caller as code
// Unknown with etcd's message (which clientv3 maps back to its error by
// the message); Janus does the same, and this test keeps it so. etcdctl
// lock and elect, which run the recipes client side, are compared too.
func TestLockElectionAuthErrorsAgainstEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test runs a real etcd")
	}
	ctx := testCtx(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t, cheapHashes)
	endpoints := []string{ref.Endpoints[0], j.Endpoint}
	type call struct {
		name string
		run  func(ctx context.Context, c *clientv3.Client, lease int64) error
	}
	calls := []call{
		{"lock", func(ctx context.Context, c *clientv3.Client, lease int64) error {
			_, err := v3lockpb.NewLockClient(c.ActiveConnection()).Lock(ctx, &v3lockpb.LockRequest{Name: []byte("/locked/l"), Lease: lease})
			return err
		}},
		{"unlock", func(ctx context.Context, c *clientv3.Client, _ int64) error {
			_, err := v3lockpb.NewLockClient(c.ActiveConnection()).Unlock(ctx, &v3lockpb.UnlockRequest{Key: []byte("/locked/l/1")})
			return err
		}},
		{"campaign", func(ctx context.Context, c *clientv3.Client, lease int64) error {
			_, err := v3electionpb.NewElectionClient(c.ActiveConnection()).Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("/locked/e"), Lease: lease, Value: []byte("v")})
			return err
		}},
		{"leader", func(ctx context.Context, c *clientv3.Client, _ int64) error {
			_, err := v3electionpb.NewElectionClient(c.ActiveConnection()).Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("/locked/e")})
			return err
		}},
		{"proclaim", func(ctx context.Context, c *clientv3.Client, lease int64) error {
			_, err := v3electionpb.NewElectionClient(c.ActiveConnection()).Proclaim(ctx, &v3electionpb.ProclaimRequest{
				Leader: &v3electionpb.LeaderKey{Name: []byte("/locked/e"), Key: []byte("/locked/e/1"), Rev: 1, Lease: lease}, Value: []byte("w")})
			return err
		}},
		{"resign", func(ctx context.Context, c *clientv3.Client, lease int64) error {
			_, err := v3electionpb.NewElectionClient(c.ActiveConnection()).Resign(ctx, &v3electionpb.ResignRequest{
				Leader: &v3electionpb.LeaderKey{Name: []byte("/locked/e"), Key: []byte("/locked/e/1"), Rev: 1, Lease: lease}})
			return err
		}},
		{"observe", func(ctx context.Context, c *clientv3.Client, _ int64) error {
			s, err := v3electionpb.NewElectionClient(c.ActiveConnection()).Observe(ctx, &v3electionpb.LeaderRequest{Name: []byte("/locked/e")})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
	}
	outs := make([]map[string]string, 2)
	for i, ep := range endpoints {
		admin := newClient(t, ep)
		setupAuthUsers(t, ctx, admin)
		outs[i] = map[string]string{}
		for _, user := range []string{"alice", "bob", ""} {
			c := newClient(t, ep)
			if user != "" {
				c = userClient(t, ep, user, user+"pw")
			}
			var lease int64
			if user != "" {
				l, err := c.Grant(ctx, 60)
				if err != nil {
					t.Fatalf("%s: grant as %s: %v", ep, user, err)
				}
				lease = int64(l.ID)
			}
			for _, cl := range calls {
				err := cl.run(ctx, c, lease)
				s, _ := status.FromError(err)
				outs[i][user+" "+cl.name] = fmt.Sprintf("%v %q", s.Code(), s.Message())
			}
		}
	}
	// etcdctl lock and elect run the same recipes client side, over KV:
	// their refusals, as etcdctl prints them, must match too.
	for i, ep := range endpoints {
		for _, user := range []string{"alice", "bob"} {
			for _, args := range [][]string{{"lock", "/locked/l", "echo", "held"}, {"elect", "/locked/e", "v"}, {"elect", "-l", "/locked/e"}} {
				full := append([]string{"--endpoints", strings.TrimPrefix(ep, "http://"), "--user", user + ":" + user + "pw", "--dial-timeout", "5s", "--command-timeout", "10s"}, args...)
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				out, err := exec.CommandContext(cctx, testenv.EtcdctlPath(t), full...).CombinedOutput()
				cancel()
				outs[i][user+" etcdctl "+strings.Join(args, " ")] = fmt.Sprintf("%v %q", exitCode(err), lastLine(string(out)))
			}
		}
	}
	refused := 0
	for k, want := range outs[0] {
		t.Logf("%s: %s", k, want)
		if got := outs[1][k]; got != want {
			t.Errorf("%s: etcd answers %s, Janus %s", k, want, got)
		}
		if strings.Contains(want, "permission denied") {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("etcd refused nothing: the users' permissions no longer exercise refusals")
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// lastLine is the last line of etcdctl's output (its error, after any
// client log lines).
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
