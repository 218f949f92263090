package etcdapi_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/testenv"
)

var (
	authDiffSeed   = flag.Uint64("etcdapi.authdiff-seed", 0, "seed of the auth differential test (0: one from the clock, logged)")
	authDiffOps    = flag.Int("etcdapi.authdiff-ops", 600, "operations per run of the auth differential test")
	authDiffSeedOf = func(t *testing.T) uint64 {
		if *authDiffSeed != 0 {
			return *authDiffSeed
		}
		s := uint64(time.Now().UnixNano())
		t.Logf("seed %d (replay with -etcdapi.authdiff-seed=%d)", s, s)
		return s
	}
)

// authUsers are the users of the auth differential test and the roles
// they start with. Their permissions overlap the key space of diffKeys in
// every way etcd knows: single keys, prefixes, ranges, from-key, and read
// and write apart.
var authUsers = []struct {
	name  string
	roles []string
}{
	{"root", []string{"root"}},
	{"alice", []string{"ra"}},
	{"bob", []string{"rb", "rc"}},
}

type authPermSpec struct {
	role     string
	key, end string
	typ      clientv3.PermissionType
}

var authPerms = []authPermSpec{
	{"ra", "foo", clientv3.GetPrefixRangeEnd("foo"), clientv3.PermissionType(authpb.Permission_READWRITE)},
	{"ra", "a", "", clientv3.PermissionType(authpb.Permission_READ)},
	{"ra", "b", "zz", clientv3.PermissionType(authpb.Permission_WRITE)},
	{"rb", "/x", "\x00", clientv3.PermissionType(authpb.Permission_READ)},
	{"rb", "c", "", clientv3.PermissionType(authpb.Permission_READWRITE)},
	{"rc", "/", clientv3.GetPrefixRangeEnd("/"), clientv3.PermissionType(authpb.Permission_WRITE)},
	{"rc", "health", "", clientv3.PermissionType(authpb.Permission_READ)},
}

// TestAuthDifferentialAgainstEtcd gives a real etcd v3.7.3 and Janus the
// same users, roles and permissions, enables auth, and runs one seeded
// stream of operations, each as a user drawn at random, with grants and
// revocations of permissions mixed in: every answer, permitted or
// refused, must be the same. A failure names its seed; replay it with
// -etcdapi.authdiff-seed=N.
func TestAuthDifferentialAgainstEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test runs a real etcd")
	}
	seed := authDiffSeedOf(t)
	ctx := testCtx(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t, cheapHashes)
	endpoints := [][]string{ref.Endpoints, {j.Endpoint}}
	names := []string{"etcd", "janus"}
	// clients[side][user]
	clients := make([]map[string]*clientv3.Client, 2)
	for i := range 2 {
		admin := newClient(t, endpoints[i]...)
		setupAuthUsers(t, ctx, admin)
		clients[i] = map[string]*clientv3.Client{}
		for _, u := range authUsers {
			clients[i][u.name] = userClient(t, endpoints[i][0], u.name, u.name+"pw")
		}
	}
	sides := []*side{{name: names[0]}, {name: names[1]}}
	pcg := rand.NewPCG(seed, seed^0x5bd1e9955bd1e995)
	g := &opGen{pcg: pcg, rng: rand.New(pcg), rev: 1}
	granted := append([]authPermSpec(nil), authPerms...)
	var history []string
	counts := map[string]int{}
	for i := range *authDiffOps {
		var op *diffOp
		var user string
		switch r := g.rng.IntN(100); {
		case r < 6:
			op, granted = authChangeOp(g, granted)
			user = "root"
		case r < 10:
			user = authUsers[g.rng.IntN(len(authUsers))].name
			op = watchOp(g)
		default:
			user = authUsers[g.rng.IntN(len(authUsers))].name
			op = g.next()
		}
		var outs [2]string
		for k, s := range sides {
			s.c = clients[k][user]
			outs[k] = op.run(ctx, s)
		}
		history = append(history, fmt.Sprintf("%d: %s as %s -> %s", i, op.desc, user, outs[0]))
		if outs[0] != outs[1] {
			if *diffVerbose {
				t.Log(strings.Join(history, "\n"))
			}
			t.Fatalf("op %d (seed %d) as %s: %s\netcd:  %s\njanus: %s", i, seed, user, op.desc, outs[0], outs[1])
		}
		switch {
		case strings.Contains(outs[0], "permission denied"):
			counts["refused"]++
		case strings.HasPrefix(outs[0], "error"):
			counts["other errors"]++
		default:
			counts["permitted"]++
		}
		g.observe(op, outs[0])
	}
	t.Logf("seed %d: %d ops agree: %v", seed, *authDiffOps, counts)
	if counts["refused"] == 0 || counts["permitted"] == 0 {
		t.Fatalf("seed %d: the mix is one-sided: %v", seed, counts)
	}
}

// setupAuthUsers creates authUsers with their roles and authPerms and
// enables auth, through an unauthenticated client.
func setupAuthUsers(t *testing.T, ctx context.Context, c *clientv3.Client) {
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("auth setup: %s: %v", what, err)
		}
	}
	for _, r := range []string{"root", "ra", "rb", "rc"} {
		_, err := c.RoleAdd(ctx, r)
		must("role add "+r, err)
	}
	for _, p := range authPerms {
		_, err := c.RoleGrantPermission(ctx, p.role, p.key, p.end, p.typ)
		must("grant "+p.role, err)
	}
	for _, u := range authUsers {
		_, err := c.UserAdd(ctx, u.name, u.name+"pw")
		must("user add "+u.name, err)
		for _, r := range u.roles {
			_, err := c.UserGrantRole(ctx, u.name, r)
			must("grant role "+r, err)
		}
	}
	_, err := c.AuthEnable(ctx)
	must("auth enable", err)
}

// authChangeOp grants a random permission to a role, or revokes one
// (usually one granted, sometimes one never granted), or grants or
// revokes a role of alice or bob, as root.
func authChangeOp(g *opGen, granted []authPermSpec) (*diffOp, []authPermSpec) {
	role := []string{"ra", "rb", "rc"}[g.rng.IntN(3)]
	if g.rng.IntN(4) == 0 {
		user := []string{"alice", "bob"}[g.rng.IntN(2)]
		if g.rng.IntN(2) == 0 {
			return &diffOp{desc: fmt.Sprintf("grant role %s to %s", role, user), run: func(ctx context.Context, s *side) string {
				if _, err := s.c.UserGrantRole(ctx, user, role); err != nil {
					return errText(err)
				}
				return "granted"
			}}, granted
		}
		return &diffOp{desc: fmt.Sprintf("revoke role %s from %s", role, user), run: func(ctx context.Context, s *side) string {
			if _, err := s.c.UserRevokeRole(ctx, user, role); err != nil {
				return errText(err)
			}
			return "revoked"
		}}, granted
	}
	if g.rng.IntN(2) == 0 && len(granted) > 0 {
		i := g.rng.IntN(len(granted))
		p := granted[i]
		if g.rng.IntN(5) == 0 {
			p.role = role // likely not granted to this role
		} else {
			granted = append(granted[:i:i], granted[i+1:]...)
		}
		return &diffOp{desc: fmt.Sprintf("revoke %s [%q,%q)", p.role, p.key, p.end), run: func(ctx context.Context, s *side) string {
			_, err := s.c.RoleRevokePermission(ctx, p.role, p.key, p.end)
			if err != nil {
				return errText(err)
			}
			return "revoked"
		}}, granted
	}
	k, opts, desc := g.keyRange(true)
	op := clientv3.OpGet(k, opts...)
	p := authPermSpec{role: role, key: k, end: string(op.RangeBytes()), typ: clientv3.PermissionType(g.rng.IntN(3))}
	granted = append(granted, p)
	return &diffOp{desc: fmt.Sprintf("grant %s %v %s", role, authpb.Permission_Type(p.typ), desc), run: func(ctx context.Context, s *side) string {
		_, err := s.c.RoleGrantPermission(ctx, p.role, p.key, p.end, p.typ)
		if err != nil {
			return errText(err)
		}
		return "granted"
	}}, granted
}

// watchOp creates a watcher on a random range and reports whether it was
// created or refused, and why.
func watchOp(g *opGen) *diffOp {
	k, opts, desc := g.keyRange(true)
	return &diffOp{desc: "watch " + desc, run: func(ctx context.Context, s *side) string {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := s.c.Watch(wctx, k, append(opts, clientv3.WithCreatedNotify())...)
		wr, ok := <-w
		if !ok {
			return "watch channel closed"
		}
		if err := wr.Err(); err != nil {
			return "watch refused: " + err.Error()
		}
		return fmt.Sprintf("watch created %v", wr.Created)
	}}
}
