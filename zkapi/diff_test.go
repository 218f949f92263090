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
)

// diffSystem is one server under the differential test, driven through two
// go-zookeeper sessions: a, which also holds every watch, and b, which owns
// ephemerals and is closed and reopened to expire them.
type diffSystem struct {
	t       *testing.T
	name    string
	addr    string
	a, b    *zk.Conn
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
// codes, created names, data, children, Stats (zxids compared structurally)
// and the watch events each operation fires. ZKAPI_DIFF_SEEDS adds seeds,
// ZKAPI_DIFF_OPS changes the ops per seed, ZKAPI_DIFF_TRACE logs every answer.
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
		})
	}
	t.Logf("differential: seeds %v, %d ops each, %d ops matched", seeds, ops, passed)
}
