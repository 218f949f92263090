package zabsim

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/januskv/janus/zab"
)

func TestTraceRoundTrip(t *testing.T) {
	tr := &Trace{Seed: 42, Voters: 5, Observers: 1, Steps: 900, Events: []Event{
		{At: 3, Kind: EvPropose, Member: 2, Arg: 3},
		{At: 10, Kind: EvPowerCut, Group: []uint64{1, 4}, Arg: 50},
		{At: 10, Kind: EvHeal},
		{At: 99, Kind: EvTrim, Member: 6},
	}}
	back, err := ParseTrace(strings.NewReader("# a comment\n" + tr.String()))
	if err != nil {
		t.Fatal(err)
	}
	if back.String() != tr.String() {
		t.Fatalf("round trip:\n%s\nbecame\n%s", tr, back)
	}
	for _, bad := range []string{
		"",
		"seed=1 voters=0 observers=0 steps=1\n",
		"seed=1 voters=3 observers=0 steps=1\n5 explode\n",
		"seed=1 voters=3 observers=0 steps=1\n5 crash m=x\n",
		"seed=1 voters=3 observers=0 steps=1\n5 crash\n4 heal\n",
	} {
		if _, err := ParseTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseTrace(%q) accepted it", bad)
		}
	}
}

func TestGeneratorIsDeterministic(t *testing.T) {
	draw := func(seed uint64) []Event {
		g := newGenerator(rand.New(rand.NewPCG(seed, 7)), []uint64{1, 2, 3}, []uint64{1, 2, 3, 4, 5}, []uint64{5})
		var out []Event
		now := int64(0)
		for range 500 {
			e, _ := g.next(now)
			if e.At < now {
				t.Fatalf("event %v before the previous one at %d", e, now)
			}
			now = e.At
			out = append(out, e)
		}
		return out
	}
	a, b := draw(9), draw(9)
	kinds := map[Kind]int{}
	for i := range a {
		if a[i].String() != b[i].String() {
			t.Fatalf("event %d: %v then %v", i, a[i], b[i])
		}
		kinds[a[i].Kind]++
	}
	for k := Kind(1); k < kindEnd; k++ {
		if kinds[k] == 0 {
			t.Errorf("500 events drew no %s", k)
		}
	}
}

func TestNetworkCutsAndLosses(t *testing.T) {
	st := newStats()
	n := newNetwork(12, st)
	all := []uint64{1, 2, 3}
	n.partition([]uint64{1}, all, true)
	if got := n.plan(1, 2, zab.MsgAck, 0); got != nil {
		t.Errorf("one-way cut 1→2 delivered at %v", got)
	}
	if got := n.plan(2, 1, zab.MsgAck, 0); len(got) != 1 {
		t.Errorf("one-way cut 1→2 also cut 2→1: %v", got)
	}
	n.heal()
	n.partition([]uint64{1, 2}, all, false)
	if n.open(3, 1) || n.open(2, 3) || !n.open(1, 2) {
		t.Errorf("partition {1,2}|{3}: cut = %v", n.cut)
	}
	n.heal()
	n.dropPct = 30
	copies := map[int]int{}
	for range 2000 {
		at := n.plan(1, 2, zab.MsgAck, 100)
		copies[len(at)]++
		for _, a := range at {
			if a <= 100 || a > 100+maxDelay+longDelay {
				t.Fatalf("delivery at %d", a)
			}
		}
	}
	if copies[0] == 0 || copies[1] == 0 || copies[2] == 0 {
		t.Errorf("lossy network: copies per message %v, want drops, singles and duplicates", copies)
	}
}

func TestCopyMessageOwnsItsBytes(t *testing.T) {
	m := zab.Message{Data: []byte("d"), Entries: []zab.Entry{{Index: 1, Data: []byte("e")}}}
	c := copyMessage(m)
	c.Data[0], c.Entries[0].Data[0], c.Entries[0].Index = 'x', 'x', 9
	if string(m.Data) != "d" || string(m.Entries[0].Data) != "e" || m.Entries[0].Index != 1 {
		t.Fatalf("copy shares memory with the original: %+v", m)
	}
}

func ents(from uint64, epoch uint32, n int) []zab.Entry {
	out := make([]zab.Entry, n)
	for i := range out {
		idx := from + uint64(i)
		out[i] = zab.Entry{Index: idx, Zxid: zab.MakeZxid(epoch, uint32(idx)), Data: []byte{byte(idx)}}
	}
	return out
}

func TestDiskCrashKeepsDurableAndATornPrefix(t *testing.T) {
	tests := []struct {
		name     string
		keepPct  int
		wantLast uint64
	}{
		{"nothing of the group", 0, 3},
		{"half the group", 50, 5},
		{"the whole group", 100, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &disk{}
			if err := d.write(ents(1, 1, 3)); err != nil {
				t.Fatal(err)
			}
			d.startGroup()
			if got := d.syncGroup(); got != 3 {
				t.Fatalf("durable %d after the first group, want 3", got)
			}
			d.write(ents(4, 1, 4))
			d.startGroup()
			d.write(ents(8, 1, 2)) // queued behind the group in flight
			if d.startGroup() {
				t.Fatal("a second group started while one is in flight")
			}
			if d.lastIndex() != 9 || d.durableIndex() != 3 {
				t.Fatalf("last %d durable %d, want 9 and 3", d.lastIndex(), d.durableIndex())
			}
			d.crash(tt.keepPct)
			if d.lastIndex() != tt.wantLast || d.durableIndex() != tt.wantLast {
				t.Fatalf("after crash: last %d durable %d, want %d", d.lastIndex(), d.durableIndex(), tt.wantLast)
			}
		})
	}
}

func TestDiskLogReads(t *testing.T) {
	d := &disk{}
	d.write(ents(1, 1, 4))
	d.write(ents(5, 2, 2))
	d.drain()
	if z, ok := d.zxidAt(5); !ok || z != zab.MakeZxid(2, 5) {
		t.Errorf("zxidAt(5) = %x %v", z, ok)
	}
	if i, ok := d.indexAtOrBelow(zab.MakeZxid(1, 99)); !ok || i != 4 {
		t.Errorf("indexAtOrBelow(epoch 1 end) = %d %v, want 4", i, ok)
	}
	if err := d.write(ents(9, 2, 1)); err == nil {
		t.Error("a write with a gap was accepted")
	}
	if err := d.truncateAfter(4); err != nil || d.lastIndex() != 4 {
		t.Fatalf("truncateAfter(4): %v, last %d", err, d.lastIndex())
	}
	for i := range uint64(4) {
		e, _ := d.entry(i + 1)
		d.sm.apply(e)
	}
	d.sm.sync()
	d.trimThrough(3)
	if d.base != (logBase{3, zab.MakeZxid(1, 3)}) {
		t.Fatalf("base after trim %+v", d.base)
	}
	if _, err := d.entries(3, 4); err == nil {
		t.Error("entries below the base were returned")
	}
	if got, err := d.entries(4, 4); err != nil || len(got) != 1 || got[0].Index != 4 {
		t.Errorf("entries(4,4) = %v, %v", got, err)
	}
	if _, ok := d.indexAtOrBelow(zab.MakeZxid(1, 2)); ok {
		t.Error("indexAtOrBelow answered for trimmed history")
	}
}

func TestStateMachineCrashKeepsAPrefix(t *testing.T) {
	var a, b stateMachine
	for _, e := range ents(1, 1, 10) {
		a.apply(&e)
		b.apply(&e)
		if e.Index == 4 {
			a.sync()
		}
	}
	if a.hash != b.hash {
		t.Fatal("equal histories hash differently")
	}
	d := &disk{sm: a}
	d.crash(50)
	if d.sm.index != 7 {
		t.Fatalf("a crash keeping half of the 6 unsynced states kept index %d, want 7", d.sm.index)
	}
	var c stateMachine
	if err := c.restore(b.snapshot()); err != nil || c.index != 10 || c.hash != b.hash {
		t.Fatalf("restore: %v, %+v", err, c)
	}
}

func TestCheckerCatches(t *testing.T) {
	e1 := zab.Entry{Index: 1, Zxid: zab.MakeZxid(1, 1), Origin: 2, ReqID: 5}
	tests := []struct {
		name string
		run  func(c *checker) error
	}{
		{"two zxids at one committed index", func(c *checker) error {
			c.applied(1, &e1, 7)
			e := e1
			e.Zxid++
			return c.applied(2, &e, 7)
		}},
		{"two states at one index", func(c *checker) error {
			c.applied(1, &e1, 7)
			return c.applied(2, &e1, 8)
		}},
		{"two leaders of one epoch", func(c *checker) error {
			c.leader(1, 3, &disk{})
			return c.leader(2, 3, &disk{})
		}},
		{"a leader without a committed entry", func(c *checker) error {
			c.applied(1, &e1, 7)
			return c.leader(2, 3, &disk{})
		}},
		{"a cut of a committed entry", func(c *checker) error {
			c.applied(1, &e1, 7)
			return c.cut(3, []zab.Entry{e1})
		}},
		{"epochs going back", func(c *checker) error {
			c.member(1, &disk{accepted: 3, current: 2}, false)
			return c.member(1, &disk{accepted: 2, current: 2}, false)
		}},
		{"currentEpoch above acceptedEpoch", func(c *checker) error {
			return c.member(1, &disk{accepted: 1, current: 2}, false)
		}},
		{"durable zxid going back", func(c *checker) error {
			d := &disk{}
			d.write([]zab.Entry{e1})
			d.drain()
			c.member(1, d, false)
			return c.member(1, &disk{}, false)
		}},
		{"a refused proposal committed", func(c *checker) error {
			c.refuse(2, 5)
			return c.applied(1, &e1, 7)
		}},
		{"one proposal committed twice", func(c *checker) error {
			c.applied(1, &e1, 7)
			e := e1
			e.Index, e.Zxid = 2, e.Zxid+1
			return c.applied(1, &e, 8)
		}},
		{"a read index below what was applied when it was asked", func(c *checker) error {
			c.applied(1, &e1, 7)
			return c.readIndex(2, 0, c.appliedMax())
		}},
		{"an acknowledged proposal missing at the end", func(c *checker) error {
			c.applied(2, &e1, 7)
			c.ack(2, 5, 1)
			return c.final(1, &disk{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChecker(func() (int, int64) { return 0, 0 })
			if err := tt.run(c); err == nil {
				t.Fatal("not caught")
			}
		})
	}
	c := newChecker(func() (int, int64) { return 0, 0 })
	d := &disk{}
	d.write([]zab.Entry{e1})
	d.drain()
	for _, err := range []error{c.applied(1, &e1, 7), c.applied(2, &e1, 7), c.leader(2, 1, d), c.leader(2, 1, d),
		c.member(1, d, false), c.cut(1, ents(2, 1, 3)), c.final(2, d)} {
		if err != nil {
			t.Fatalf("a consistent history was refused: %v", err)
		}
	}
}

func TestShrinkFindsTheCulprits(t *testing.T) {
	tr := &Trace{Seed: 1, Voters: 3, Steps: 10}
	for i := range 40 {
		k := EvPropose
		if i%3 == 0 {
			k = EvCrash
		}
		tr.Events = append(tr.Events, Event{At: int64(i), Kind: k, Member: uint64(i%3 + 1)})
	}
	// It "fails" while it holds the crash at 9 and the proposal at 31.
	fails := func(t *Trace) bool {
		has := func(at int64) bool {
			return slices.ContainsFunc(t.Events, func(e Event) bool { return e.At == at })
		}
		return has(9) && has(31)
	}
	got, runs := Shrink(tr, fails, 1000)
	if len(got.Events) != 2 || got.Events[0].At != 9 || got.Events[1].At != 31 {
		t.Fatalf("shrunk to %v in %d runs", got.Events, runs)
	}
	if len(tr.Events) != 40 {
		t.Fatal("Shrink changed its input")
	}
	if _, runs := Shrink(tr, fails, 5); runs > 5 {
		t.Fatalf("budget 5, %d runs", runs)
	}
}
