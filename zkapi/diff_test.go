package zkapi_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// diffSystem is one server under the differential test, driven through two
// go-zookeeper sessions: a, which also holds every watch, and b, which owns
// ephemerals and is closed and reopened to expire them; and through a raw
// session r for what go-zookeeper cannot send (getEphemerals,
// getAllChildrenNumber, multiRead, whoAmI, createContainer and createTTL
// inside a multi). a and r may authenticate as different digest users.
type diffSystem struct {
	t       *testing.T
	name    string
	addr    string
	a, b    *zk.Conn
	r       *rawClient
	bGen    int
	watches []<-chan zk.Event
	fired   []bool
	// zxids and sessions get labels in order of first appearance, so
	// the two systems' answers compare structurally.
	zxids    map[int64]string
	sessions map[int64]string
}

func newDiffSystem(t *testing.T, name, addr string) *diffSystem {
	s := &diffSystem{t: t, name: name, addr: addr, zxids: map[int64]string{}, sessions: map[int64]string{}}
	s.a, _ = connect(t, addr, 10*time.Second)
	s.sessions[s.a.SessionID()] = "A"
	s.reopenB()
	s.r = dialRaw(t, addr)
	resp := s.r.handshake(jute.ConnectRequest{TimeOut: 40000, Passwd: make([]byte, 16)})
	s.sessions[resp.SessionID] = "R"
	// Close the session rather than let it expire: its ephemerals would
	// go at a different moment on each server, in the middle of a later
	// seed's getAllChildrenNumber of "/".
	t.Cleanup(func() { s.r.call(jute.OpCloseSession, nil, nil) })
	return s
}

func (s *diffSystem) reopenB() {
	if s.b != nil {
		s.b.Close()
	}
	s.b, _ = connect(s.t, s.addr, 10*time.Second)
	s.bGen++
	s.sessions[s.b.SessionID()] = "B" + strconv.Itoa(s.bGen)
}

func (s *diffSystem) zxid(z int64) string {
	if l, ok := s.zxids[z]; ok {
		return l
	}
	l := "z" + strconv.Itoa(len(s.zxids))
	s.zxids[z] = l
	return l
}

func (s *diffSystem) stat(st *zk.Stat) string {
	if st == nil {
		return "nostat"
	}
	owner := "0"
	if st.EphemeralOwner != 0 {
		owner = s.sessions[st.EphemeralOwner]
		if owner == "" {
			owner = "unknown-session"
		}
	}
	return fmt.Sprintf("{cz=%s mz=%s pz=%s v=%d cv=%d av=%d owner=%s len=%d kids=%d}",
		s.zxid(st.Czxid), s.zxid(st.Mzxid), s.zxid(st.Pzxid), st.Version, st.Cversion, st.Aversion,
		owner, st.DataLength, st.NumChildren)
}

// jstat renders a wire Stat like stat does a go-zookeeper one.
func (s *diffSystem) jstat(st *jute.Stat) string {
	return s.stat(&zk.Stat{Czxid: st.Czxid, Mzxid: st.Mzxid, Pzxid: st.Pzxid, Ctime: st.Ctime, Mtime: st.Mtime,
		Version: st.Version, Cversion: st.Cversion, Aversion: st.Aversion, EphemeralOwner: st.EphemeralOwner,
		DataLength: st.DataLength, NumChildren: st.NumChildren})
}

// rcall sends one request on the raw session and renders its outcome.
func (s *diffSystem) rcall(op jute.OpCode, req, resp jute.Record) (string, bool) {
	h := s.r.call(op, req, resp)
	return h.Err.String(), h.Err == jute.CodeOk
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// events renders the watch events that have arrived since the last call,
// after a round trip on session a has flushed every notification queued
// before it.
func (s *diffSystem) events() string {
	if _, _, err := s.a.Exists("/"); err != nil {
		s.t.Fatalf("%s: flush: %v", s.name, err)
	}
	var out []string
	for i, ch := range s.watches {
		if s.fired[i] {
			continue
		}
		select {
		case ev := <-ch:
			s.fired[i] = true
			out = append(out, fmt.Sprintf("w%d:%v:%s", i, ev.Type, ev.Path))
		default:
		}
	}
	return strings.Join(out, " ")
}

func (s *diffSystem) watch(ch <-chan zk.Event) {
	if ch != nil {
		s.watches = append(s.watches, ch)
		s.fired = append(s.fired, false)
	}
}

// diffOp is one generated operation, applied identically to each system.
type diffOp struct {
	desc string
	run  func(s *diffSystem) string
}

type diffGen struct {
	rng  *rand.Rand
	base string
}

func (g *diffGen) path() string {
	names := []string{"/a", "/a/b", "/a/b/c", "/b", "/b/c", "/c", "/a/c"}
	return g.base + names[g.rng.IntN(len(names))]
}

func (g *diffGen) version() int32 { return int32(g.rng.IntN(4)) - 1 }

func (g *diffGen) writeReq() (any, string) {
	p := g.path()
	switch g.rng.IntN(4) {
	case 0:
		flags := []int32{0, zk.FlagSequence}[g.rng.IntN(2)]
		return &zk.CreateRequest{Path: p, Data: []byte("m"), Acl: openACL, Flags: flags}, fmt.Sprintf("create %s %d", p, flags)
	case 1:
		v := g.version()
		return &zk.DeleteRequest{Path: p, Version: v}, fmt.Sprintf("delete %s %d", p, v)
	case 2:
		v := g.version()
		return &zk.SetDataRequest{Path: p, Data: []byte("mm"), Version: v}, fmt.Sprintf("set %s %d", p, v)
	}
	v := g.version()
	return &zk.CheckVersionRequest{Path: p, Version: v}, fmt.Sprintf("check %s %d", p, v)
}

func (g *diffGen) next() diffOp {
	if k := g.rng.IntN(30); k >= 16 {
		return g.nextWide(k - 16)
	}
	p := g.path()
	data := []byte(strings.Repeat("x", g.rng.IntN(4)))
	switch k := g.rng.IntN(16); {
	case k < 4:
		flags := []int32{0, 0, zk.FlagEphemeral, zk.FlagSequence, zk.FlagEphemeral | zk.FlagSequence}[g.rng.IntN(5)]
		byB := flags&zk.FlagEphemeral != 0 && g.rng.IntN(2) == 0
		return diffOp{fmt.Sprintf("create %s flags=%d byB=%v", p, flags, byB), func(s *diffSystem) string {
			c := s.a
			if byB {
				c = s.b
			}
			name, err := c.Create(p, data, flags, openACL)
			if err != nil {
				return errText(err)
			}
			_, st, err := s.a.Exists(name)
			return name + " " + errText(err) + " " + s.stat(st)
		}}
	case k < 6:
		v := g.version()
		return diffOp{fmt.Sprintf("delete %s %d", p, v), func(s *diffSystem) string { return errText(s.a.Delete(p, v)) }}
	case k < 8:
		v := g.version()
		return diffOp{fmt.Sprintf("set %s %d", p, v), func(s *diffSystem) string {
			st, err := s.a.Set(p, data, v)
			return errText(err) + " " + s.stat(st)
		}}
	case k < 9:
		return diffOp{"getW " + p, func(s *diffSystem) string {
			d, st, ch, err := s.a.GetW(p)
			s.watch(ch)
			return fmt.Sprintf("%q %s %s", d, errText(err), s.stat(st))
		}}
	case k < 10:
		return diffOp{"existsW " + p, func(s *diffSystem) string {
			ok, st, ch, err := s.a.ExistsW(p)
			s.watch(ch)
			if !ok {
				st = nil
			}
			return fmt.Sprintf("%v %s %s", ok, errText(err), s.stat(st))
		}}
	case k < 11:
		return diffOp{"childrenW " + p, func(s *diffSystem) string {
			kids, st, ch, err := s.a.ChildrenW(p)
			s.watch(ch)
			slices.Sort(kids)
			return fmt.Sprintf("%v %s %s", kids, errText(err), s.stat(st))
		}}
	case k < 13:
		n := 1 + g.rng.IntN(3)
		var reqs []any
		var descs []string
		for range n {
			r, d := g.writeReq()
			reqs = append(reqs, r)
			descs = append(descs, d)
		}
		return diffOp{"multi[" + strings.Join(descs, "; ") + "]", func(s *diffSystem) string {
			res, err := s.a.Multi(reqs...)
			out := []string{errText(err)}
			for _, r := range res {
				out = append(out, fmt.Sprintf("(%s %s %s)", r.String, errText(r.Error), s.stat(r.Stat)))
			}
			return strings.Join(out, " ")
		}}
	case k < 14:
		return diffOp{"close and reopen B", func(s *diffSystem) string { s.reopenB(); return "ok" }}
	case k < 15:
		return diffOp{"getACL " + p, func(s *diffSystem) string {
			acl, st, err := s.a.GetACL(p)
			return fmt.Sprintf("%v %s %s", acl, errText(err), s.stat(st))
		}}
	}
	return diffOp{"get " + p, func(s *diffSystem) string {
		d, st, err := s.a.Get(p)
		return fmt.Sprintf("%q %s %s", d, errText(err), s.stat(st))
	}}
}

// TestDifferentialAgainstZooKeeper runs seeded random operations against a
// real ZooKeeper 3.8 and against Janus and compares every answer: error
// codes, created names, data, children, ACLs, Stats (zxids compared
// structurally) and the watch events each operation fires. Each seed ends
// with a reaping phase (containers and TTL nodes) and a comparison of its
// whole final subtree. The fixed seeds run first, then one seed from the
// clock (logged), so every run also covers new ground; ZKAPI_DIFF_ROTATE=0
// leaves it out. ZKAPI_DIFF_SEEDS adds seeds (e.g. "$(seq 5 40)", or a
// logged rotating seed to replay it), ZKAPI_DIFF_OPS changes the ops per
// seed, ZKAPI_DIFF_TRACE logs every answer.
func TestDifferentialAgainstZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper")
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	j := startJanus(t, zkapi.Config{})
	seeds := []uint64{1, 2, 3, 42}
	for _, f := range strings.Fields(os.Getenv("ZKAPI_DIFF_SEEDS")) {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("ZKAPI_DIFF_SEEDS: %v", err)
		}
		seeds = append(seeds, n)
	}
	if os.Getenv("ZKAPI_DIFF_ROTATE") != "0" {
		seed := uint64(time.Now().UnixNano())
		t.Logf("rotating seed %d (replay with ZKAPI_DIFF_SEEDS=%d ZKAPI_DIFF_ROTATE=0)", seed, seed)
		seeds = append(seeds, seed)
	}
	ops := 300
	if n, err := strconv.Atoi(os.Getenv("ZKAPI_DIFF_OPS")); err == nil && n > 0 {
		ops = n
	}
	passed := 0
	trace := os.Getenv("ZKAPI_DIFF_TRACE") != ""
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			systems := []*diffSystem{newDiffSystem(t, "zookeeper", ref.Addr), newDiffSystem(t, "janus", j.Addr)}
			base := fmt.Sprintf("/diff%d", seed)
			for _, s := range systems {
				if _, err := s.a.Create(base, nil, 0, openACL); err != nil {
					t.Fatalf("%s: create %s: %v", s.name, base, err)
				}
			}
			g := &diffGen{rng: rand.New(rand.NewPCG(seed, seed)), base: base}
			for i := range ops {
				op := g.next()
				var got [2]string
				for k, s := range systems {
					got[k] = op.run(s) + " | events: " + s.events()
				}
				if trace {
					t.Logf("op %d %s: %s", i, op.desc, got[1])
				}
				if got[0] != got[1] {
					t.Fatalf("seed %d op %d %s:\n  zookeeper: %s\n  janus:     %s", seed, i, op.desc, got[0], got[1])
				}
				passed++
			}
			reapPhase(t, g.rng, base, systems)
			passed++
		})
	}
	t.Logf("differential: seeds %v, %d ops each, %d ops matched", seeds, ops, passed)
}

// aclChoice is one ACL the generator may set: by go-zookeeper (a) or on the
// wire (r).
type aclChoice struct {
	desc string
	acl  []zk.ACL
}

var diffACLs = []aclChoice{
	{"open", zk.WorldACL(zk.PermAll)},
	{"world-read", zk.WorldACL(zk.PermRead)},
	{"world-create-delete", zk.WorldACL(zk.PermCreate | zk.PermDelete)},
	{"world-admin", zk.WorldACL(zk.PermAdmin)},
	{"alice", zk.DigestACL(zk.PermAll, "alice", "pw")},
	{"bob-rw", zk.DigestACL(zk.PermRead|zk.PermWrite, "bob", "pw")},
	{"alice+world-read", append(zk.DigestACL(zk.PermAll, "alice", "pw"), zk.WorldACL(zk.PermRead)...)},
	{"auth", zk.AuthACL(zk.PermAll)},
	{"ip-loopback", []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1"}}},
	{"ip-loopback-net", []zk.ACL{{Perms: zk.PermRead | zk.PermCreate | zk.PermDelete, Scheme: "ip", ID: "127.0.0.0/8"}}},
	{"ip-elsewhere", []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "10.0.0.0/8"}}},
	{"empty", []zk.ACL{}},
	{"world-someone", []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}}},
	{"digest-malformed", []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "nocolon"}}},
	{"unknown-scheme", []zk.ACL{{Perms: zk.PermAll, Scheme: "nope", ID: "x"}}},
}

func (g *diffGen) acl() aclChoice { return diffACLs[g.rng.IntN(len(diffACLs))] }

func juteACL(acl []zk.ACL) []jute.ACL {
	out := make([]jute.ACL, len(acl))
	for i, a := range acl {
		out[i] = jute.ACL{Perms: a.Perms, ID: jute.ID{Scheme: a.Scheme, ID: a.ID}}
	}
	return out
}

// longTTL outlives any test run: TTL nodes in the random mix are never
// reaped while it runs, so their answers do not depend on timing.
const longTTL = time.Hour

// nextWide generates the ops that go beyond the core mix: ACLs and auth,
// TTL nodes, the raw session's ephemerals and the read-only requests
// go-zookeeper lacks.
func (g *diffGen) nextWide(k int) diffOp {
	p := g.path()
	switch k {
	case 0:
		acl := g.acl()
		flags := []int32{0, zk.FlagSequence, zk.FlagEphemeral}[g.rng.IntN(3)]
		return diffOp{fmt.Sprintf("create %s flags=%d acl=%s", p, flags, acl.desc), func(s *diffSystem) string {
			name, err := s.a.Create(p, []byte("acl"), flags, acl.acl)
			return name + " " + errText(err)
		}}
	case 1:
		acl := g.acl()
		flags := []jute.CreateMode{jute.ModePersistent, jute.ModeEphemeral, jute.ModeEphemeralSequential}[g.rng.IntN(3)]
		return diffOp{fmt.Sprintf("r create2 %s flags=%v acl=%s", p, flags, acl.desc), func(s *diffSystem) string {
			var resp jute.Create2Response
			code, ok := s.rcall(jute.OpCreate2, &jute.CreateRequest{Path: p, Data: []byte("r"), ACL: juteACL(acl.acl), Flags: flags}, &resp)
			if !ok {
				return code
			}
			return resp.Path + " " + s.jstat(&resp.Stat)
		}}
	case 2, 3:
		acl, v := g.acl(), g.version()
		byR := k == 3
		return diffOp{fmt.Sprintf("setACL %s %s v=%d byR=%v", p, acl.desc, v, byR), func(s *diffSystem) string {
			if byR {
				var resp jute.SetACLResponse
				code, ok := s.rcall(jute.OpSetACL, &jute.SetACLRequest{Path: p, ACL: juteACL(acl.acl), Version: v}, &resp)
				if !ok {
					return code
				}
				return s.jstat(&resp.Stat)
			}
			st, err := s.a.SetACL(p, acl.acl, v)
			return errText(err) + " " + s.stat(st)
		}}
	case 4:
		return diffOp{"r getACL " + p, func(s *diffSystem) string {
			var resp jute.GetACLResponse
			code, ok := s.rcall(jute.OpGetACL, &jute.GetACLRequest{Path: p}, &resp)
			if !ok {
				return code
			}
			return fmt.Sprintf("%v %s", resp.ACL, s.jstat(&resp.Stat))
		}}
	case 5:
		if g.rng.IntN(2) == 0 {
			return diffOp{"a addAuth alice", func(s *diffSystem) string { return errText(s.a.AddAuth("digest", []byte("alice:pw"))) }}
		}
		return diffOp{"r addAuth bob", func(s *diffSystem) string {
			code, _ := s.rcall(jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("bob:pw")}, nil)
			return code
		}}
	case 6:
		v := g.version()
		switch g.rng.IntN(4) {
		case 0:
			return diffOp{"r getData " + p, func(s *diffSystem) string {
				var resp jute.GetDataResponse
				code, ok := s.rcall(jute.OpGetData, &jute.GetDataRequest{Path: p}, &resp)
				if !ok {
					return code
				}
				return fmt.Sprintf("%q %s", resp.Data, s.jstat(&resp.Stat))
			}}
		case 1:
			return diffOp{fmt.Sprintf("r setData %s %d", p, v), func(s *diffSystem) string {
				var resp jute.SetDataResponse
				code, ok := s.rcall(jute.OpSetData, &jute.SetDataRequest{Path: p, Data: []byte("rr"), Version: v}, &resp)
				if !ok {
					return code
				}
				return s.jstat(&resp.Stat)
			}}
		case 2:
			return diffOp{fmt.Sprintf("r delete %s %d", p, v), func(s *diffSystem) string {
				code, _ := s.rcall(jute.OpDelete, &jute.DeleteRequest{Path: p, Version: v}, nil)
				return code
			}}
		}
		return diffOp{"r getChildren2 " + p, func(s *diffSystem) string {
			var resp jute.GetChildren2Response
			code, ok := s.rcall(jute.OpGetChildren2, &jute.GetChildren2Request{Path: p}, &resp)
			if !ok {
				return code
			}
			slices.Sort(resp.Children)
			return fmt.Sprintf("%v %s", resp.Children, s.jstat(&resp.Stat))
		}}
	case 7:
		flags := []int32{zk.FlagTTL, zk.FlagPersistentSequentialWithTTL}[g.rng.IntN(2)]
		return diffOp{fmt.Sprintf("createTTL %s flags=%d", p, flags), func(s *diffSystem) string {
			name, err := s.a.CreateTTL(p, []byte("t"), flags, openACL, longTTL)
			if err != nil {
				return errText(err)
			}
			_, st, err := s.a.Exists(name)
			return name + " " + errText(err) + " " + s.stat(st)
		}}
	case 8:
		prefix := []string{"", "/", g.base, g.base + "/a", g.base + "/a/b", g.base + "/b/", "/nope"}[g.rng.IntN(7)]
		return diffOp{fmt.Sprintf("r getEphemerals %q", prefix), func(s *diffSystem) string {
			var resp jute.GetEphemeralsResponse
			code, ok := s.rcall(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: prefix}, &resp)
			if !ok {
				return code
			}
			slices.Sort(resp.Ephemerals)
			return fmt.Sprint(resp.Ephemerals)
		}}
	case 9:
		q := []string{"/", g.base, p, p, p + "/", "/zookeeper"}[g.rng.IntN(6)]
		return diffOp{"r getAllChildrenNumber " + q, func(s *diffSystem) string {
			var resp jute.GetAllChildrenNumberResponse
			code, ok := s.rcall(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: q}, &resp)
			if !ok {
				return code
			}
			return fmt.Sprint(resp.TotalNumber)
		}}
	case 10:
		n := 1 + g.rng.IntN(3)
		var ops []jute.MultiOp
		var descs []string
		for range n {
			q := g.path()
			if g.rng.IntN(2) == 0 {
				ops = append(ops, jute.MultiOp{Type: jute.OpGetData, Request: &jute.GetDataRequest{Path: q}})
				descs = append(descs, "get "+q)
			} else {
				ops = append(ops, jute.MultiOp{Type: jute.OpGetChildren, Request: &jute.GetChildrenRequest{Path: q}})
				descs = append(descs, "children "+q)
			}
		}
		return diffOp{"r multiRead[" + strings.Join(descs, "; ") + "]", func(s *diffSystem) string {
			var resp jute.MultiResponse
			code, ok := s.rcall(jute.OpMultiRead, &jute.MultiRequest{Ops: ops}, &resp)
			if !ok {
				return code
			}
			return s.multiResults(resp.Results)
		}}
	case 11:
		return diffOp{"r whoAmI", func(s *diffSystem) string {
			var resp jute.WhoAmIResponse
			code, ok := s.rcall(jute.OpWhoAmI, nil, &resp)
			if !ok {
				return code
			}
			return fmt.Sprint(resp.ClientInfo)
		}}
	}
	// A multi on the raw session: version checks, TTL creates, data and
	// deletes, all or nothing.
	n := 1 + g.rng.IntN(3)
	var ops []jute.MultiOp
	var descs []string
	for range n {
		q, v := g.path(), g.version()
		switch g.rng.IntN(5) {
		case 0:
			ops = append(ops, jute.MultiOp{Type: jute.OpCheck, Request: &jute.CheckVersionRequest{Path: q, Version: v}})
			descs = append(descs, fmt.Sprintf("check %s %d", q, v))
		case 1:
			ops = append(ops, jute.MultiOp{Type: jute.OpCreateTTL, Request: &jute.CreateTTLRequest{Path: q, ACL: juteACL(openACL), Flags: jute.ModePersistentWithTTL, TTL: longTTL.Milliseconds()}})
			descs = append(descs, "createTTL "+q)
		case 2:
			ops = append(ops, jute.MultiOp{Type: jute.OpCreate2, Request: &jute.CreateRequest{Path: q, ACL: juteACL(openACL), Flags: jute.ModeEphemeralSequential}})
			descs = append(descs, "create2 eph-seq "+q)
		case 3:
			ops = append(ops, jute.MultiOp{Type: jute.OpSetData, Request: &jute.SetDataRequest{Path: q, Data: []byte("mr"), Version: v}})
			descs = append(descs, fmt.Sprintf("set %s %d", q, v))
		default:
			ops = append(ops, jute.MultiOp{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: q, Version: v}})
			descs = append(descs, fmt.Sprintf("delete %s %d", q, v))
		}
	}
	return diffOp{"r multi[" + strings.Join(descs, "; ") + "]", func(s *diffSystem) string {
		var resp jute.MultiResponse
		code, ok := s.rcall(jute.OpMulti, &jute.MultiRequest{Ops: ops}, &resp)
		if !ok {
			return code
		}
		return s.multiResults(resp.Results)
	}}
}

func (s *diffSystem) multiResults(rs []jute.MultiResult) string {
	var out []string
	for _, r := range rs {
		switch r.Type {
		case jute.OpError:
			out = append(out, "err:"+r.Err.String())
		case jute.OpCreate:
			out = append(out, "create:"+r.Path)
		case jute.OpCreate2:
			out = append(out, "create2:"+r.Path+" "+s.jstat(&r.Stat))
		case jute.OpSetData:
			out = append(out, "set:"+s.jstat(&r.Stat))
		case jute.OpGetData:
			out = append(out, fmt.Sprintf("get:%q %s", r.Data, s.jstat(&r.Stat)))
		case jute.OpGetChildren:
			kids := slices.Clone(r.Children)
			slices.Sort(kids)
			out = append(out, fmt.Sprintf("children:%v", kids))
		default:
			out = append(out, r.Type.String())
		}
	}
	return strings.Join(out, " ")
}

// dumpNode is one znode of a subtree as read from one system.
type dumpNode struct {
	path string
	data string
	stat zk.Stat
	acl  string
}

// dump reads the subtree at root in sorted order, with session a.
func (s *diffSystem) dump(root string) []dumpNode {
	var out []dumpNode
	var walk func(p string)
	walk = func(p string) {
		data, st, err := s.a.Get(p)
		if err != nil {
			out = append(out, dumpNode{path: p, data: "error: " + errText(err)})
			return
		}
		acl, _, err := s.a.GetACL(p)
		out = append(out, dumpNode{path: p, data: string(data), stat: *st, acl: fmt.Sprint(acl, errText(err))})
		kids, _, err := s.a.Children(p)
		if err != nil {
			return
		}
		slices.Sort(kids)
		for _, k := range kids {
			walk(p + "/" + k)
		}
	}
	walk(root)
	return out
}

func (s *diffSystem) renderDump(d []dumpNode) string {
	var b strings.Builder
	for _, n := range d {
		st := n.stat
		fmt.Fprintf(&b, "%s %q %s %s\n", n.path, n.data, s.stat(&st), n.acl)
	}
	return b.String()
}

// settle waits until the subtree at root stops changing on every system
// across two reads more than one reaper interval apart, so every container
// and TTL node due for removal (and every container emptied by that) is
// gone, and returns each system's subtree. The systems are read in the
// same rounds, so the wait is paid once; their raw sessions are kept
// alive meanwhile.
func settle(t *testing.T, systems []*diffSystem, root string) [][]dumpNode {
	prev := make([][]dumpNode, len(systems))
	for k, s := range systems {
		prev[k] = s.dump(root)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		time.Sleep(1500 * time.Millisecond)
		stable := true
		for k, s := range systems {
			s.rcall(jute.OpPing, nil, nil)
			cur := s.dump(root)
			if !slices.EqualFunc(prev[k], cur, func(a, b dumpNode) bool { return a == b }) {
				stable = false
			}
			prev[k] = cur
		}
		if stable {
			return prev
		}
		if time.Now().After(deadline) {
			t.Fatalf("subtree %s still changing after a minute", root)
		}
	}
}

// reapPhase builds containers and TTL nodes under base/r with session r,
// watches them from a, empties some, waits until both systems have reaped
// what they will, and compares the seed's final trees and the watch events. Only
// nodes that cannot be reaped yet are touched before the wait, so every
// answer is independent of when the reapers run.
func reapPhase(t *testing.T, rng *rand.Rand, base string, systems []*diffSystem) {
	root := base + "/r"
	type plan struct {
		path  string
		kind  int // 0 container, 1 short TTL, 2 long TTL, 3 persistent
		child bool
		empty bool // delete the child before waiting
	}
	var plans []plan
	for i := range 4 + rng.IntN(6) {
		pl := plan{path: fmt.Sprintf("%s/n%d", root, i), kind: rng.IntN(4), child: rng.IntN(4) > 0}
		pl.empty = pl.child && rng.IntN(3) > 0
		plans = append(plans, pl)
	}
	step := func(desc string, run func(s *diffSystem) string) {
		t.Helper()
		var got [2]string
		for k, s := range systems {
			got[k] = run(s)
		}
		if os.Getenv("ZKAPI_DIFF_TRACE") != "" {
			t.Logf("reap phase %s: %s", desc, got[1])
		}
		if got[0] != got[1] {
			t.Fatalf("reap phase %s:\n  zookeeper: %s\n  janus:     %s", desc, got[0], got[1])
		}
	}
	step("create "+root, func(s *diffSystem) string {
		_, err := s.a.Create(root, nil, 0, openACL)
		return errText(err)
	})
	acl := juteACL(openACL)
	create := func(pl plan) {
		var ops []jute.MultiOp
		switch pl.kind {
		case 0:
			ops = append(ops, jute.MultiOp{Type: jute.OpCreateContainer, Request: &jute.CreateRequest{Path: pl.path, ACL: acl, Flags: jute.ModeContainer}})
		case 1, 2:
			ttl := int64(1)
			if pl.kind == 2 {
				ttl = longTTL.Milliseconds()
			}
			ops = append(ops, jute.MultiOp{Type: jute.OpCreateTTL, Request: &jute.CreateTTLRequest{Path: pl.path, ACL: acl, Flags: jute.ModePersistentWithTTL, TTL: ttl}})
		default:
			ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: pl.path, ACL: acl}})
		}
		if pl.child {
			ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: pl.path + "/k", ACL: acl}})
		}
		step(fmt.Sprintf("multi create %+v", pl), func(s *diffSystem) string {
			var resp jute.MultiResponse
			code, ok := s.rcall(jute.OpMulti, &jute.MultiRequest{Ops: ops}, &resp)
			if !ok {
				return code
			}
			return s.multiResults(resp.Results)
		})
	}
	// A short-TTL node without a child may go as soon as it exists, so it
	// is created only after the last look at root's children: earlier,
	// whether a listing still showed it would depend on when each reaper
	// ran.
	goesAtOnce := func(pl plan) bool { return pl.kind == 1 && !pl.child }
	for _, pl := range plans {
		if goesAtOnce(pl) {
			continue
		}
		create(pl)
		step("watch "+pl.path, func(s *diffSystem) string {
			_, st, ch, err := s.a.GetW(pl.path)
			s.watch(ch)
			kids, _, cch, cerr := s.a.ChildrenW(pl.path)
			s.watch(cch)
			return fmt.Sprintf("%s %s %v %s", errText(err), s.stat(st), kids, errText(cerr))
		})
	}
	step("childrenW "+root, func(s *diffSystem) string {
		kids, _, ch, err := s.a.ChildrenW(root)
		s.watch(ch)
		slices.Sort(kids)
		return fmt.Sprintf("%v %s", kids, errText(err))
	})
	for _, pl := range plans {
		if goesAtOnce(pl) {
			create(pl)
		}
	}
	for _, pl := range plans {
		if pl.empty {
			step("delete "+pl.path+"/k", func(s *diffSystem) string { return errText(s.a.Delete(pl.path+"/k", -1)) })
		}
	}
	dumps := settle(t, systems, base)
	step("final tree", func(s *diffSystem) string {
		k := slices.Index(systems, s)
		return s.renderDump(dumps[k]) + "events: " + s.events()
	})
	step("getAllChildrenNumber /", func(s *diffSystem) string {
		var resp jute.GetAllChildrenNumberResponse
		code, ok := s.rcall(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: "/"}, &resp)
		if !ok {
			return code
		}
		return fmt.Sprint(resp.TotalNumber)
	})
}
