package etcdapi_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/januskv/janus/internal/testenv"
)

var (
	diffSeeds   = flag.Int("etcdapi.diff-seeds", 1, "number of fixed seeds the differential test runs")
	diffSeed    = flag.Uint64("etcdapi.diff-seed", 1, "first fixed seed of the differential test")
	diffRotate  = flag.Bool("etcdapi.diff-rotate", true, "also run one seed taken from the clock (logged), so every run explores new ground")
	diffVerbose = flag.Bool("etcdapi.diff-verbose", false, "log every operation of a failing differential run")
	diffOps     = flag.Int("etcdapi.diff-ops", 2000, "operations per seed in the differential test")
)

// TestDifferentialAgainstEtcd applies one seeded random stream of
// operations to a real etcd v3.7.3 and to Janus and requires the same
// answers, field by field: header revisions, key-values, counts, more,
// txn outcomes, errors by code and message, and the events one watcher
// over every key sees. Member and cluster IDs differ by nature; lease IDs
// are compared through the order in which the leases were granted.
//
// Every request shape is drawn, ranges at a revision inside a Txn too (at
// past, compacted and future revisions, in read-only Txns and in Txns that
// also write), and TestTxnRangeAtRevision covers those one by one.
//
// The fixed seeds run first; then, unless -etcdapi.diff-rotate=false, one
// seed from the clock, so each run also covers new ground. A failure names
// its seed: replay it with -etcdapi.diff-seed=N -etcdapi.diff-rotate=false.
func TestDifferentialAgainstEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test runs a real etcd")
	}
	seeds := make([]uint64, 0, *diffSeeds+1)
	for s := range *diffSeeds {
		seeds = append(seeds, *diffSeed+uint64(s))
	}
	if *diffRotate {
		seed := uint64(time.Now().UnixNano())
		t.Logf("rotating seed %d (replay with -etcdapi.diff-seed=%d -etcdapi.diff-rotate=false)", seed, seed)
		seeds = append(seeds, seed)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runDifferential(t, seed, *diffOps)
		})
	}
}

// side is one server under comparison, with its lease IDs by grant order.
type side struct {
	name   string
	c      *clientv3.Client
	leases []int64
	events []*mvccpb.Event
}

func (s *side) leaseIndex(id int64) int64 {
	if id == 0 {
		return 0
	}
	if i := slices.Index(s.leases, id); i >= 0 {
		return int64(i + 1)
	}
	return -id // unknown: keep it visible in a diff
}

// leaseID maps a generated lease reference (grant order, 1-based; or a
// raw unknown ID when negative) to this side's ID.
func (s *side) leaseID(ref int64) int64 {
	if ref > 0 && int(ref) <= len(s.leases) {
		return s.leases[ref-1]
	}
	return -ref
}

func runDifferential(t *testing.T, seed uint64, n int) {
	ctx := testCtx(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t)
	sides := []*side{
		{name: "etcd", c: newClient(t, ref.Endpoints...)},
		{name: "janus", c: j.Client},
	}
	// Each side's watcher is drained as the run goes, as a real client
	// would: etcd cancels a watcher left behind by a compaction. It
	// starts at the next revision (everything, on these fresh stores):
	// etcd syncs a watcher from the current revision only every 100ms,
	// and cancels it if a compaction comes first.
	drained := make([]chan []*mvccpb.Event, len(sides))
	final := make(chan int64, len(sides))
	for i, s := range sides {
		w := s.c.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
		if wr := <-w; !wr.Created {
			t.Fatalf("%s: watch not created: %v", s.name, wr.Err())
		}
		drained[i] = make(chan []*mvccpb.Event, 1)
		go func() {
			var events []*mvccpb.Event
			defer func() { drained[i] <- events }()
			last := int64(-1)
			for {
				select {
				case wr, ok := <-w:
					if !ok || wr.Err() != nil {
						t.Errorf("%s: watch ended: %v", s.name, wr.Err())
						return
					}
					events = append(events, wr.Events...)
				case last = <-final:
					final <- last // for the other side
				}
				if last >= 0 && (len(events) == 0 && last == 1 || len(events) > 0 && events[len(events)-1].Kv.ModRevision >= last) {
					return
				}
			}
		}()
	}
	pcg := rand.NewPCG(seed, seed^0xda3e39cb94b95bdb)
	g := &opGen{pcg: pcg, rng: rand.New(pcg), rev: 1}
	var history []string
	refusedTxns := 0 // refused for a range at a compacted or future revision
	for i := range n {
		op := g.next()
		var outs [2]string
		for k, s := range sides {
			outs[k] = op.run(ctx, s)
		}
		history = append(history, fmt.Sprintf("%d: %s -> %s", i, op.desc, outs[0]))
		if outs[0] != outs[1] {
			if *diffVerbose {
				t.Log(strings.Join(history, "\n"))
			}
			t.Fatalf("op %d (seed %d): %s\netcd:  %s\njanus: %s", i, seed, op.desc, outs[0], outs[1])
		}
		g.observe(op, outs[0])
		if strings.HasPrefix(op.desc, "txn") && strings.Contains(outs[0], "required revision") {
			refusedTxns++
		}
	}
	// Every event up to the last revision, in the same order.
	last, err := sides[0].c.Get(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	final <- last.Header.Revision
	for i, s := range sides {
		s.events = <-drained[i]
	}
	a, b := eventsText(sides[0]), eventsText(sides[1])
	if a != b {
		t.Fatalf("watch events differ:\netcd:\n%s\njanus:\n%s", a, b)
	}
	t.Logf("seed %d: %d ops (%d ranges at a revision inside a Txn, %d Txns refused for one), final revision %d, %d events agree",
		seed, n, g.txnRevReads, refusedTxns, last.Header.Revision, len(sides[0].events))
}

func eventsText(s *side) string {
	var b strings.Builder
	for _, e := range s.events {
		e = proto.Clone(e).(*mvccpb.Event)
		normKV(s, e.Kv)
		normKV(s, e.PrevKv)
		b.WriteString(prototext.MarshalOptions{}.Format(e))
		b.WriteByte('\n')
	}
	return b.String()
}

func normKV(s *side, kv *mvccpb.KeyValue) {
	if kv != nil {
		kv.Lease = s.leaseIndex(kv.Lease)
	}
}

// normalize keeps what both servers must agree on.
func normalize(s *side, m proto.Message) string {
	m = proto.Clone(m)
	var walk func(m proto.Message)
	walk = func(m proto.Message) {
		switch r := m.(type) {
		case *pb.RangeResponse:
			normHeader(r.Header)
			for _, kv := range r.Kvs {
				normKV(s, kv)
			}
		case *pb.PutResponse:
			normHeader(r.Header)
			normKV(s, r.PrevKv)
		case *pb.DeleteRangeResponse:
			normHeader(r.Header)
			for _, kv := range r.PrevKvs {
				normKV(s, kv)
			}
		case *pb.TxnResponse:
			normHeader(r.Header)
			for _, op := range r.Responses {
				switch v := op.Response.(type) {
				case *pb.ResponseOp_ResponseRange:
					walk(v.ResponseRange)
				case *pb.ResponseOp_ResponsePut:
					walk(v.ResponsePut)
				case *pb.ResponseOp_ResponseDeleteRange:
					walk(v.ResponseDeleteRange)
				case *pb.ResponseOp_ResponseTxn:
					walk(v.ResponseTxn)
				}
			}
		case *pb.CompactionResponse:
			normHeader(r.Header)
		case *pb.LeaseGrantResponse:
			normHeader(r.Header)
			r.ID = s.leaseIndex(r.ID)
		case *pb.LeaseRevokeResponse:
			normHeader(r.Header)
		case *pb.LeaseTimeToLiveResponse:
			normHeader(r.Header)
			r.ID = s.leaseIndex(r.ID)
			if r.TTL > 0 {
				r.TTL = 1 // the remaining time is a clock reading
			}
			// etcd lists a lease's keys in Go map order (its lessor keeps
			// them in a map): the order is not part of the answer.
			slices.SortFunc(r.Keys, bytes.Compare)
		case *pb.LeaseLeasesResponse:
			normHeader(r.Header)
			for _, l := range r.Leases {
				l.ID = s.leaseIndex(l.ID)
			}
			slices.SortFunc(r.Leases, func(a, b *pb.LeaseStatus) int { return int(a.ID - b.ID) })
		}
	}
	walk(m)
	return fmt.Sprintf("%T %s", m, prototext.MarshalOptions{}.Format(m))
}

func normHeader(h *pb.ResponseHeader) {
	if h != nil {
		h.ClusterId, h.MemberId, h.RaftTerm = 0, 0, 0
	}
}

func errText(err error) string {
	st, _ := status.FromError(err)
	return fmt.Sprintf("error %s: %s", st.Code(), st.Message())
}

// diffOp is one generated operation, run the same way on either side.
type diffOp struct {
	desc string
	run  func(ctx context.Context, s *side) string
	// grant is set for lease grants, so the generator learns the lease.
	grant bool
	// compact is the revision a Compact asked for.
	compact int64
}

// opGen draws operations over a small key space so they collide: puts
// overwrite, deletes hit, compares both hold and fail, ranges see many
// keys. ZooKeeper-style paths make the core build implicit parents, which
// etcd clients must never see.
type opGen struct {
	pcg        *rand.PCG
	rng        *rand.Rand // draws from pcg
	rev        int64      // a guess at the current revision, from the last answer
	compactRev int64
	nLeases    int64
	// txnRevReads counts the ranges at a revision drawn inside a Txn.
	txnRevReads int
}

var diffKeys = []string{"a", "b", "c", "foo", "foo/bar", "foo/baz", "foo0", "zz", "/x", "/x/y", "/x/y/z", "/q/r", "health"}

func (g *opGen) key() string { return diffKeys[g.rng.IntN(len(diffKeys))] }

func (g *opGen) value() string {
	const letters = "abcdefgh"
	b := make([]byte, g.rng.IntN(6))
	for i := range b {
		b[i] = letters[g.rng.IntN(len(letters))]
	}
	return string(b)
}

// leaseRef picks a lease: usually one granted (maybe revoked since),
// sometimes one that never existed.
func (g *opGen) leaseRef() int64 {
	if g.nLeases == 0 || g.rng.IntN(8) == 0 {
		return -(1_000_000 + int64(g.rng.IntN(3)))
	}
	return 1 + g.rng.Int64N(g.nLeases)
}

// keyRange picks a single key, a prefix, a [key, end) range or from-key.
func (g *opGen) keyRange(fromKey bool) (string, []clientv3.OpOption, string) {
	k := g.key()
	n := 5
	if !fromKey {
		n = 4
	}
	switch g.rng.IntN(n) {
	case 0:
		p := k[:1+g.rng.IntN(len(k))]
		return p, []clientv3.OpOption{clientv3.WithPrefix()}, "prefix " + p
	case 1:
		end := g.key()
		return k, []clientv3.OpOption{clientv3.WithRange(end)}, fmt.Sprintf("range [%s,%s)", k, end)
	case 4:
		return k, []clientv3.OpOption{clientv3.WithFromKey()}, "from " + k
	}
	return k, nil, "key " + k
}

func (g *opGen) rangeOpts(inTxn bool) ([]clientv3.OpOption, string) {
	var opts []clientv3.OpOption
	var desc []string
	if g.rng.IntN(3) == 0 {
		l := int64(g.rng.IntN(4))
		opts = append(opts, clientv3.WithLimit(l))
		desc = append(desc, fmt.Sprint("limit=", l))
	}
	if g.rng.IntN(3) == 0 {
		target := clientv3.SortTarget(g.rng.IntN(5))
		order := clientv3.SortOrder(g.rng.IntN(3))
		opts = append(opts, clientv3.WithSort(target, order))
		desc = append(desc, fmt.Sprintf("sort=%v/%v", target, order))
	}
	if g.rng.IntN(8) == 0 {
		opts = append(opts, clientv3.WithCountOnly())
		desc = append(desc, "count-only")
	}
	if g.rng.IntN(8) == 0 {
		opts = append(opts, clientv3.WithKeysOnly())
		desc = append(desc, "keys-only")
	}
	if g.rng.IntN(5) == 0 {
		opts = append(opts, clientv3.WithSerializable())
		desc = append(desc, "serializable")
	}
	if g.rng.IntN(6) == 0 {
		r := g.rng.Int64N(g.rev + 1)
		switch g.rng.IntN(4) {
		case 0:
			opts = append(opts, clientv3.WithMinModRev(r))
		case 1:
			opts = append(opts, clientv3.WithMaxModRev(r))
		case 2:
			opts = append(opts, clientv3.WithMinCreateRev(r))
		case 3:
			opts = append(opts, clientv3.WithMaxCreateRev(r))
		}
		desc = append(desc, fmt.Sprint("revfilter ", r))
	}
	if g.rng.IntN(5) == 0 {
		// Any revision: compacted, readable and future ones, the same
		// inside a Txn as outside one.
		r := max(g.compactRev-1, 1) + g.rng.Int64N(g.rev-g.compactRev+4)
		if inTxn {
			g.txnRevReads++
		}
		opts = append(opts, clientv3.WithRev(r))
		desc = append(desc, fmt.Sprint("rev=", r))
	}
	return opts, strings.Join(desc, " ")
}

func (g *opGen) getOp(inTxn bool) (clientv3.Op, string) {
	k, kopts, kdesc := g.keyRange(true)
	ropts, rdesc := g.rangeOpts(inTxn)
	return clientv3.OpGet(k, append(kopts, ropts...)...), "get " + kdesc + " " + rdesc
}

func (g *opGen) putOp(leaseOf func(int64) int64) (clientv3.Op, string) {
	k, v := g.key(), g.value()
	var opts []clientv3.OpOption
	desc := fmt.Sprintf("put %s=%q", k, v)
	if g.rng.IntN(2) == 0 {
		opts = append(opts, clientv3.WithPrevKV())
		desc += " prev-kv"
	}
	switch g.rng.IntN(12) {
	case 0, 1, 2:
		ref := g.leaseRef()
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(leaseOf(ref))))
		desc += fmt.Sprint(" lease#", ref)
	case 3:
		opts = append(opts, clientv3.WithIgnoreValue())
		desc += " ignore-value"
		return clientv3.OpPut(k, "", opts...), desc
	case 4:
		opts = append(opts, clientv3.WithIgnoreLease())
		desc += " ignore-lease"
	}
	return clientv3.OpPut(k, v, opts...), desc
}

// deleteOp draws a delete. Inside a Txn it never deletes "from a key":
// etcd's duplicate-key check misses such a range, and a later put of a
// key in it with ignore_value then crashes etcd v3.7.3 (its pre-checks
// read the state before the Txn).
func (g *opGen) deleteOp(inTxn bool) (clientv3.Op, string) {
	k, kopts, kdesc := g.keyRange(!inTxn)
	if g.rng.IntN(2) == 0 {
		kopts = append(kopts, clientv3.WithPrevKV())
		kdesc += " prev-kv"
	}
	return clientv3.OpDelete(k, kopts...), "delete " + kdesc
}

func (g *opGen) compare() (clientv3.Cmp, string) {
	k := g.key()
	var c clientv3.Cmp
	var what string
	switch g.rng.IntN(5) {
	case 0:
		c, what = clientv3.Version(k), "version"
	case 1:
		c, what = clientv3.CreateRevision(k), "create"
	case 2:
		c, what = clientv3.ModRevision(k), "mod"
	case 3:
		c, what = clientv3.Value(k), "value"
	case 4:
		c, what = clientv3.LeaseValue(k), "lease"
	}
	rel := []string{"=", "!=", "<", ">"}[g.rng.IntN(4)]
	var operand any
	switch what {
	case "value":
		operand = g.value()
	case "lease":
		operand = int64(0) // lease IDs differ between the servers
	case "version":
		operand = g.rng.Int64N(4)
	default:
		operand = g.rng.Int64N(g.rev + 2)
	}
	cmp := clientv3.Compare(c, rel, operand)
	desc := fmt.Sprintf("%s(%s) %s %v", what, k, rel, operand)
	if g.rng.IntN(6) == 0 {
		end := g.key()
		cmp = cmp.WithRange(end)
		desc += " over [" + k + "," + end + ")"
	}
	return cmp, desc
}

// txnOps draws a Txn branch. depth bounds nesting.
func (g *opGen) txnOps(depth int, leaseOf func(int64) int64) ([]clientv3.Op, []string) {
	var ops []clientv3.Op
	var desc []string
	for range g.rng.IntN(4) {
		var op clientv3.Op
		var d string
		switch r := g.rng.IntN(10); {
		case r < 4:
			op, d = g.putOp(leaseOf)
		case r < 7:
			op, d = g.getOp(true)
		case r < 9:
			op, d = g.deleteOp(true)
		default:
			if depth == 0 {
				continue
			}
			cmps, cdesc, then, tdesc, els, edesc := g.txnParts(depth-1, leaseOf)
			op = clientv3.OpTxn(cmps, then, els)
			d = fmt.Sprintf("txn{if %s then %s else %s}", cdesc, tdesc, edesc)
		}
		ops = append(ops, op)
		desc = append(desc, d)
	}
	return ops, desc
}

func (g *opGen) txnParts(depth int, leaseOf func(int64) int64) ([]clientv3.Cmp, string, []clientv3.Op, string, []clientv3.Op, string) {
	var cmps []clientv3.Cmp
	var cdesc []string
	for range g.rng.IntN(3) {
		c, d := g.compare()
		cmps = append(cmps, c)
		cdesc = append(cdesc, d)
	}
	then, tdesc := g.txnOps(depth, leaseOf)
	els, edesc := g.txnOps(depth, leaseOf)
	return cmps, strings.Join(cdesc, " && "), then, strings.Join(tdesc, "; "), els, strings.Join(edesc, "; ")
}

// next draws one operation. Its random choices are made once, here, with
// lease references that each side maps to its own IDs when it runs.
func (g *opGen) next() *diffOp {
	// Ops whose shape depends on lease IDs are drawn against a recording
	// mapper, then rebuilt per side from the recorded references.
	switch r := g.rng.IntN(100); {
	case r < 30:
		return g.leaseAware(func(leaseOf func(int64) int64) (clientv3.Op, string) { return g.putOp(leaseOf) })
	case r < 55:
		op, d := g.getOp(false)
		return kvOp(d, op)
	case r < 65:
		op, d := g.deleteOp(false)
		return kvOp(d, op)
	case r < 85:
		return g.leaseAware(func(leaseOf func(int64) int64) (clientv3.Op, string) {
			cmps, cd, then, td, els, ed := g.txnParts(2, leaseOf)
			return clientv3.OpTxn(cmps, then, els), fmt.Sprintf("txn{if %s then %s else %s}", cd, td, ed)
		})
	case r < 88:
		// 0 now and then: etcd takes it once, then refuses it.
		rev := max(g.compactRev-1, 1) + g.rng.Int64N(max(g.rev-g.compactRev, 0)+3)
		if g.rng.IntN(8) == 0 {
			rev = 0
		}
		return &diffOp{desc: fmt.Sprint("compact ", rev), compact: rev, run: func(ctx context.Context, s *side) string {
			resp, err := s.c.Compact(ctx, rev)
			if err != nil {
				return errText(err)
			}
			return normalize(s, (*pb.CompactionResponse)(resp))
		}}
	case r < 93:
		ttl := 1000 + g.rng.Int64N(100)
		return &diffOp{desc: fmt.Sprint("grant ttl=", ttl), grant: true, run: func(ctx context.Context, s *side) string {
			resp, err := s.c.Grant(ctx, ttl)
			if err != nil {
				return errText(err)
			}
			s.leases = append(s.leases, int64(resp.ID))
			return normalize(s, &pb.LeaseGrantResponse{Header: resp.ResponseHeader, ID: int64(resp.ID), TTL: resp.TTL, Error: resp.Error})
		}}
	case r < 96:
		ref := g.leaseRef()
		return &diffOp{desc: fmt.Sprint("revoke lease#", ref), run: func(ctx context.Context, s *side) string {
			resp, err := s.c.Revoke(ctx, clientv3.LeaseID(s.leaseID(ref)))
			if err != nil {
				return errText(err)
			}
			return normalize(s, (*pb.LeaseRevokeResponse)(resp))
		}}
	case r < 98:
		ref := g.leaseRef()
		return &diffOp{desc: fmt.Sprint("time-to-live lease#", ref), run: func(ctx context.Context, s *side) string {
			resp, err := s.c.TimeToLive(ctx, clientv3.LeaseID(s.leaseID(ref)), clientv3.WithAttachedKeys())
			if err != nil {
				return errText(err)
			}
			return normalize(s, &pb.LeaseTimeToLiveResponse{Header: resp.ResponseHeader, ID: int64(resp.ID), TTL: resp.TTL, GrantedTTL: resp.GrantedTTL, Keys: resp.Keys})
		}}
	default:
		return &diffOp{desc: "leases", run: func(ctx context.Context, s *side) string {
			resp, err := s.c.Leases(ctx)
			if err != nil {
				return errText(err)
			}
			out := &pb.LeaseLeasesResponse{Header: resp.ResponseHeader}
			for _, l := range resp.Leases {
				out.Leases = append(out.Leases, &pb.LeaseStatus{ID: int64(l.ID)})
			}
			return normalize(s, out)
		}}
	}
}

// leaseAware draws an op once with a recording lease mapper, then replays
// the same random choices for each side so lease references resolve to
// that side's IDs.
func (g *opGen) leaseAware(draw func(leaseOf func(int64) int64) (clientv3.Op, string)) *diffOp {
	state := *g.pcg // copy the generator state to replay the same draws
	_, desc := draw(func(ref int64) int64 { return ref })
	after := *g.pcg
	drawn := g.txnRevReads
	return &diffOp{desc: desc, run: func(ctx context.Context, s *side) string {
		*g.pcg = state
		op, _ := draw(s.leaseID)
		*g.pcg, g.txnRevReads = after, drawn
		return runKV(ctx, s, op)
	}}
}

func kvOp(desc string, op clientv3.Op) *diffOp {
	return &diffOp{desc: desc, run: func(ctx context.Context, s *side) string { return runKV(ctx, s, op) }}
}

func runKV(ctx context.Context, s *side, op clientv3.Op) string {
	resp, err := s.c.Do(ctx, op)
	if err != nil {
		return errText(err)
	}
	switch {
	case resp.Get() != nil:
		return normalize(s, (*pb.RangeResponse)(resp.Get()))
	case resp.Put() != nil:
		return normalize(s, (*pb.PutResponse)(resp.Put()))
	case resp.Del() != nil:
		return normalize(s, (*pb.DeleteRangeResponse)(resp.Del()))
	case resp.Txn() != nil:
		return normalize(s, (*pb.TxnResponse)(resp.Txn()))
	}
	return "empty response"
}

// observe learns the revision and compaction point from an agreed answer.
func (g *opGen) observe(op *diffOp, out string) {
	if i := strings.Index(out, "revision:"); i >= 0 {
		var rev int64
		fmt.Sscan(out[i+len("revision:"):], &rev)
		if rev > g.rev {
			g.rev = rev
		}
	}
	if op.grant && !strings.HasPrefix(out, "error") {
		g.nLeases++
	}
	if op.compact != 0 && !strings.HasPrefix(out, "error") {
		g.compactRev = op.compact
	}
}

// TestTxnRangeAtRevision compares, one case at a time, ranges at a
// revision inside a Txn: etcd reads them at the revision named, and
// refuses the whole Txn, writes and all, when that revision is compacted
// or in the future. Each case runs in a read-only Txn, in one that also
// writes (its put must then be refused too), and nested in another Txn.
func TestTxnRangeAtRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real etcd")
	}
	ctx := testCtx(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t)
	sides := []*side{{name: "etcd", c: newClient(t, ref.Endpoints...)}, {name: "janus", c: j.Client}}
	var base int64
	for _, s := range sides {
		var rev int64
		for _, kv := range [][2]string{{"k", "v1"}, {"j", "w1"}, {"k", "v2"}, {"j", "w2"}, {"k", "v3"}} {
			resp, err := s.c.Put(ctx, kv[0], kv[1])
			if err != nil {
				t.Fatalf("%s: put: %v", s.name, err)
			}
			rev = resp.Header.Revision
		}
		if _, err := s.c.Compact(ctx, rev-2); err != nil {
			t.Fatalf("%s: compact: %v", s.name, err)
		}
		if base != 0 && rev != base {
			t.Fatalf("the servers start at different revisions: %d and %d", base, rev)
		}
		base = rev
	}
	read := func(rev int64) clientv3.Op {
		return clientv3.OpGet("", clientv3.WithPrefix(), clientv3.WithRev(rev))
	}
	for _, tc := range []struct {
		name string
		rev  int64
	}{
		// Refused ones first: they write nothing, so base stays the
		// current revision until the accepted writing Txns move it.
		{"the next revision", base + 1},
		{"a future revision", base + 1000},
		{"a compacted revision", base - 3},
		{"the compaction point", base - 2},
		{"an old revision", base - 1},
		{"the revision before the Txns", base},
	} {
		for _, shape := range []struct {
			name string
			op   clientv3.Op
		}{
			{"read-only", clientv3.OpTxn(nil, []clientv3.Op{read(tc.rev), clientv3.OpGet("k")}, nil)},
			{"failure branch", clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Version("k"), "=", 0)}, nil, []clientv3.Op{read(tc.rev)})},
			// The read after the put does not see it: it reads the
			// revision named, not the Txn's own.
			{"writing", clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("w", "x"), read(tc.rev)}, nil)},
			{"nested", clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("n", "x"),
				clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpGet("k", clientv3.WithRev(tc.rev), clientv3.WithCountOnly())}, nil)}, nil)},
		} {
			var outs [2]string
			for i, s := range sides {
				resp, err := s.c.Do(ctx, shape.op)
				if err != nil {
					outs[i] = errText(err)
					continue
				}
				outs[i] = normalize(s, (*pb.TxnResponse)(resp.Txn()))
			}
			if outs[0] != outs[1] {
				t.Errorf("a range at %s (%d) in a %s Txn:\netcd:  %s\njanus: %s", tc.name, tc.rev, shape.name, outs[0], outs[1])
			}
		}
	}
}

// TestCompactRefusals compares etcd's answers to compactions at revisions
// already compacted, at 0 (taken once, on a store never compacted) and in
// the future.
func TestCompactRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real etcd")
	}
	ctx := testCtx(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t)
	sides := []*side{{name: "etcd", c: newClient(t, ref.Endpoints...)}, {name: "janus", c: j.Client}}
	type step struct {
		desc string
		run  func(c *clientv3.Client) (proto.Message, error)
	}
	compact := func(rev int64) step {
		return step{fmt.Sprint("compact ", rev), func(c *clientv3.Client) (proto.Message, error) {
			resp, err := c.Compact(ctx, rev)
			return (*pb.CompactionResponse)(resp), err
		}}
	}
	put := step{"put", func(c *clientv3.Client) (proto.Message, error) {
		resp, err := c.Put(ctx, "k", "v")
		return (*pb.PutResponse)(resp), err
	}}
	steps := []step{
		compact(0), compact(0), compact(-1), put, put, put,
		compact(3), compact(3), compact(2), compact(0), compact(5), compact(4),
	}
	for _, st := range steps {
		var outs [2]string
		for i, s := range sides {
			m, err := st.run(s.c)
			if err != nil {
				outs[i] = errText(err)
				continue
			}
			outs[i] = normalize(s, m)
		}
		if outs[0] != outs[1] {
			t.Errorf("%s:\netcd:  %s\njanus: %s", st.desc, outs[0], outs[1])
		}
	}
}

// TestWatchFromCompactedRevision compares what a watch from below and
// above a compaction gets, after the compaction the Kubernetes API server
// makes (a Txn on its compact key, then a physical Compact at the revision
// of the last object write): from below it, a response with
// compact_revision set that cancels the watch, which Kubernetes turns into
// 410 Gone; from above, the events since. etcd batches replayed events
// into fewer responses than Janus, so events are compared as one list.
func TestWatchFromCompactedRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real etcd")
	}
	ctx := testCtx(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t)
	sides := []*side{{name: "etcd", c: newClient(t, ref.Endpoints...)}, {name: "janus", c: j.Client}}
	var compactRev, last int64
	for _, s := range sides {
		for i := range 6 {
			resp, err := s.c.Put(ctx, fmt.Sprint("/registry/pods/p", i%2), fmt.Sprint(i))
			if err != nil {
				t.Fatalf("%s: put: %v", s.name, err)
			}
			compactRev = resp.Header.Revision
		}
		// The API server's compactor: claim the compaction through the
		// version of compact_rev_key, then compact.
		const key = "compact_rev_key"
		tr, err := s.c.Txn(ctx).If(clientv3.Compare(clientv3.Version(key), "=", 0)).
			Then(clientv3.OpPut(key, fmt.Sprint(compactRev))).Else(clientv3.OpGet(key)).Commit()
		if err != nil || !tr.Succeeded {
			t.Fatalf("%s: compact txn: %v %+v", s.name, err, tr)
		}
		if _, err := s.c.Compact(ctx, compactRev, clientv3.WithCompactPhysical()); err != nil {
			t.Fatalf("%s: compact: %v", s.name, err)
		}
		for _, v := range []string{"after", "again"} {
			resp, err := s.c.Put(ctx, "/registry/pods/p0", v)
			if err != nil {
				t.Fatalf("%s: put: %v", s.name, err)
			}
			last = resp.Header.Revision
		}
	}
	for _, start := range []int64{1, 2, compactRev - 1, compactRev + 1, last} {
		var outs [2]string
		for i, s := range sides {
			wctx, cancel := context.WithCancel(ctx)
			w := s.c.Watch(wctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithRev(start),
				clientv3.WithPrevKV(), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
			var got []string
			for wr := range w {
				if len(wr.Events) > 0 {
					for _, ev := range wr.Events {
						got = append(got, prototext.MarshalOptions{}.Format(ev))
					}
					if wr.Events[len(wr.Events)-1].Kv.ModRevision >= last {
						break
					}
					continue
				}
				h := proto.Clone(wr.Header).(*pb.ResponseHeader)
				normHeader(h)
				got = append(got, prototext.MarshalOptions{}.Format(&pb.WatchResponse{Header: h, Created: wr.Created,
					Canceled: wr.Canceled, CompactRevision: wr.CompactRevision, CancelReason: wr.CancelReason}))
				if wr.Canceled {
					break
				}
			}
			cancel()
			outs[i] = strings.Join(got, "\n")
		}
		if outs[0] != outs[1] {
			t.Errorf("watch from %d (compacted at %d):\netcd:\n%s\njanus:\n%s", start, compactRev, outs[0], outs[1])
		}
	}
}
