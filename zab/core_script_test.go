package zab

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the Core scripts in testdata/core from what the Core does now")

// TestCoreScripts runs the protocol scripts in testdata/core: readable
// transcripts of inputs to Cores (messages delivered, ticks, what the log
// writer reports durable) and of the Readies they produce, in the manner of
// etcd-io/raft's testdata. Each command is a line, "----", then the
// expected output up to a blank line. The harness (scriptEnv) carries out
// each Ready the way the driver must, on in-memory disks, and checks the
// ordering rules of the Ready contract itself, so a script cannot be
// rewritten into accepting a broken rule. -rewrite regenerates the
// expected outputs.
func TestCoreScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "core", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/core: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptCase struct {
	cmd  string
	want string
	pre  []string // comments and blank lines before the command
}

func parseScript(t *testing.T, path string) []scriptCase {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []scriptCase
	var pre []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			pre = append(pre, line)
			continue
		}
		c := scriptCase{cmd: line, pre: pre}
		pre = nil
		if !sc.Scan() || sc.Text() != "----" {
			t.Fatalf("%s: command %q is not followed by ----", path, line)
		}
		var out []string
		for sc.Scan() && sc.Text() != "" {
			out = append(out, sc.Text())
		}
		c.want = strings.Join(out, "\n")
		cases = append(cases, c)
	}
	return cases
}

func runScript(t *testing.T, path string) {
	cases := parseScript(t, path)
	env := &scriptEnv{t: t, nodes: map[uint64]*scriptNode{}}
	var rewritten strings.Builder
	for _, c := range cases {
		got := strings.TrimRight(env.run(c.cmd), "\n")
		if *rewrite {
			for _, p := range c.pre {
				rewritten.WriteString(p + "\n")
			}
			fmt.Fprintf(&rewritten, "%s\n----\n", c.cmd)
			if got != "" {
				rewritten.WriteString(got + "\n")
			}
			rewritten.WriteString("\n")
			continue
		}
		if got != c.want {
			t.Fatalf("%s: %s\n got:\n%s\nwant:\n%s", path, c.cmd, got, c.want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptNode is one member: its Core and what its driver would hold on
// disk.
type scriptNode struct {
	id     uint64
	core   *Core
	disk   *memLog // durable entries
	writer []Entry // handed to the writer, not yet durable
	epochs Epochs  // persisted
	// membership is the last committed configuration persisted (nil: the
	// starting one).
	membership *Membership
	applied    uint64 // handed to the applier
	state      uint64 // the applied index a snapshot of this member reflects
	// pendingSnaps are snapshot requests the snapshot command answers.
	pendingSnaps []SnapshotRequest
	// v1 plays a member of the version before configuration entries: its
	// FOLLOWERINFO does not announce FlagReadsV2, and a message only
	// version 2 encodes is refused on its way to it (the transport closes
	// the connection), so it never arrives.
	v1 bool
}

// memLog is an in-memory LogReader: the entries after base.
type memLog struct {
	base     uint64
	baseZxid uint64
	ents     []Entry
}

func (l *memLog) last() uint64 { return l.base + uint64(len(l.ents)) }

func (l *memLog) Entries(from, to uint64) ([]Entry, error) {
	if from <= l.base || to > l.last() {
		return nil, fmt.Errorf("entries %d-%d outside the log (%d, %d]", from, to, l.base, l.last())
	}
	return slices.Clone(l.ents[from-l.base-1 : to-l.base]), nil
}

func (l *memLog) ZxidAt(index uint64) (uint64, bool) {
	switch {
	case index == l.base:
		return l.baseZxid, true
	case index > l.base && index <= l.last():
		return l.ents[index-l.base-1].Zxid, true
	}
	return 0, false
}

func (l *memLog) IndexAtOrBelow(zxid uint64) (uint64, bool) {
	if l.baseZxid > zxid {
		return 0, false
	}
	idx := l.base
	for _, e := range l.ents {
		if e.Zxid > zxid {
			break
		}
		idx = e.Index
	}
	return idx, true
}

func (l *memLog) FirstIndex() uint64 {
	if len(l.ents) == 0 {
		return 0
	}
	return l.ents[0].Index
}

type scriptEnv struct {
	t     *testing.T
	nodes map[uint64]*scriptNode
	net   []scriptMsg // sent, not yet delivered
	now   int64       // wall clock for entry times
}

type scriptMsg struct {
	from, to uint64
	msg      Message
}

func (env *scriptEnv) run(cmd string) string {
	fields := strings.Fields(cmd)
	name, args := fields[0], map[string]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	var out strings.Builder
	switch name {
	case "add":
		env.add(args, &out)
	case "tick":
		n := env.num(args, "n", 1)
		for _, id := range env.ids(args) {
			for range n {
				env.nodes[id].core.Tick()
			}
		}
	case "deliver":
		env.deliver(args, &out)
	case "drop":
		env.drop(args, &out)
	case "durable":
		for _, id := range env.ids(args) {
			env.durable(env.nodes[id], &out)
		}
	case "ready":
		for _, id := range env.ids(args) {
			env.ready(env.nodes[id], &out)
		}
	case "propose":
		n := env.nodes[env.num(args, "id", 0)]
		env.now++
		n.core.Propose(Proposal{ReqID: env.num(args, "req", 0), Data: []byte(args["data"]), Time: env.now})
	case "reconfig":
		n := env.nodes[env.num(args, "id", 0)]
		env.now++
		ch := MembershipChange{ReqID: env.num(args, "req", 0), Voters: env.idList(args["voters"]),
			Observers: env.idList(args["observers"]), Version: env.num(args, "version", 0), Time: env.now,
			Addrs: map[uint64]string{}}
		for _, id := range append(slices.Clone(ch.Voters), ch.Observers...) {
			if _, none := args["noaddr"]; !none {
				ch.Addrs[id] = fmt.Sprintf("m%d:2888", id)
			}
		}
		n.core.ProposeMembership(ch)
	case "transfer":
		n := env.nodes[env.num(args, "id", 0)]
		n.core.TransferLeadership(env.num(args, "req", 0), env.num(args, "target", 0))
	case "members":
		for _, id := range env.ids(args) {
			n := env.nodes[id]
			fmt.Fprintf(&out, "%d: %s active %s", id, n.core.role, n.core.conf.String())
			if nx := n.core.next; nx != nil {
				fmt.Fprintf(&out, " pending %s", nx.String())
			}
			if m := n.membership; m != nil {
				fmt.Fprintf(&out, " persisted %s", FormatZxid(m.Version))
			}
			out.WriteString("\n")
		}
	case "read":
		env.nodes[env.num(args, "id", 0)].core.ReadIndex(env.num(args, "req", 0))
	case "snapshot":
		env.snapshot(env.nodes[env.num(args, "id", 0)])
	case "stabilize":
		if _, quiet := args["quiet"]; quiet {
			env.stabilize(args, &strings.Builder{})
		} else {
			env.stabilize(args, &out)
		}
	case "status":
		for _, id := range env.ids(args) {
			n := env.nodes[id]
			st := n.core.Status()
			fmt.Fprintf(&out, "%d: %s leader=%d epochs=%d/%d (disk %d/%d) last=%d zxid=%s committed=%d applied=%d disk=%d\n",
				id, st.Role, st.LeaderID, st.AcceptedEpoch, st.Epoch, n.epochs.Accepted, n.epochs.Current,
				st.LastIndex, FormatZxid(st.LastZxid), st.CommittedIndex, n.applied, n.disk.last())
		}
	default:
		env.t.Fatalf("unknown command %q", cmd)
	}
	return out.String()
}

func (env *scriptEnv) num(args map[string]string, k string, def uint64) uint64 {
	v, ok := args[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 0, 64) // 0x.. for versions
	if err != nil {
		env.t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

func (env *scriptEnv) idList(s string) []uint64 {
	var ids []uint64
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			env.t.Fatalf("id list %q: %v", s, err)
		}
		ids = append(ids, n)
	}
	return ids
}

// ids returns the members named by id= (a list), or all of them.
func (env *scriptEnv) ids(args map[string]string) []uint64 {
	if s, ok := args["id"]; ok {
		return env.idList(s)
	}
	ids := make([]uint64, 0, len(env.nodes))
	for id := range env.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// add starts a member: add id=1 voters=1,2,3 [observers=4]
// [log=E:A-B,...] [epochs=A/C] [applied=N] [base=N:E:C] [join=1]. A log run E:A-B
// holds indexes A through B in epoch E, counters continuing the run
// before it in that epoch (or from 1).
// A last argument v1 plays a member of the previous version (see
// scriptNode.v1).
func (env *scriptEnv) add(args map[string]string, out *strings.Builder) {
	id := env.num(args, "id", 0)
	_, v1 := args["v1"]
	n := &scriptNode{id: id, disk: &memLog{}, v1: v1}
	if b := args["base"]; b != "" {
		var idx uint64
		var e, ctr uint32
		fmt.Sscanf(b, "%d:%d:%d", &idx, &e, &ctr)
		n.disk.base, n.disk.baseZxid = idx, MakeZxid(e, ctr)
	}
	for _, run := range strings.Split(args["log"], ",") {
		if run == "" {
			continue
		}
		var e uint32
		var a, b uint64
		if _, err := fmt.Sscanf(run, "%d:%d-%d", &e, &a, &b); err != nil {
			env.t.Fatalf("log run %q: %v", run, err)
		}
		for i := a; i <= b; i++ {
			z := n.disk.baseZxid
			if k := len(n.disk.ents); k > 0 {
				z = n.disk.ents[k-1].Zxid
			}
			ctr := uint32(1)
			if ZxidEpoch(z) == e {
				ctr = ZxidCounter(z) + 1
			}
			n.disk.ents = append(n.disk.ents, Entry{Index: i, Zxid: MakeZxid(e, ctr), Time: int64(i), Data: []byte(fmt.Sprintf("e%d", i))})
		}
	}
	if s := args["epochs"]; s != "" {
		fmt.Sscanf(s, "%d/%d", &n.epochs.Accepted, &n.epochs.Current)
	}
	n.applied = env.num(args, "applied", n.disk.base)
	n.state = n.applied
	lastZxid, lastTime := n.disk.baseZxid, int64(0)
	if k := len(n.disk.ents); k > 0 {
		lastZxid, lastTime = n.disk.ents[k-1].Zxid, n.disk.ents[k-1].Time
	}
	var unapplied []Entry
	if n.disk.last() > n.applied {
		unapplied, _ = n.disk.Entries(n.applied+1, n.disk.last())
	}
	core, err := NewCore(CoreConfig{
		ID: id, Voters: env.idList(args["voters"]), Observers: env.idList(args["observers"]),
		ElectionTicks: 4, MaxDiffEntries: int(env.num(args, "maxdiff", 100)), CanSnapshot: true,
		Seed: [2]uint64{id, 1}, Log: n.disk,
		Epochs: n.epochs, LastIndex: n.disk.last(), LastZxid: lastZxid, LastTime: lastTime,
		Applied: n.applied, Unapplied: unapplied, Join: args["join"] != "",
	})
	if err != nil {
		env.t.Fatal(err)
	}
	n.core = core
	env.nodes[id] = n
	env.ready(n, out)
}

// ready takes a member's Ready, prints it and carries it out in the
// contract's order, failing the test on any ordering rule it breaks.
func (env *scriptEnv) ready(n *scriptNode, out *strings.Builder) {
	rd := n.core.Ready()
	p := func(format string, a ...any) { fmt.Fprintf(out, "%d: "+format+"\n", append([]any{n.id}, a...)...) }
	if rd.Fatal != nil {
		p("FATAL %v", rd.Fatal)
		return
	}
	if rd.Drain {
		p("drain (writer holds %d)", len(n.writer))
		env.drainWriter(n)
	}
	if s := rd.Sync; s != nil {
		switch {
		case s.Snapshot != nil:
			p("sync: restore snapshot at %d (%s)", s.Snapshot.Index, FormatZxid(s.Snapshot.Zxid))
			*n.disk = memLog{base: s.Snapshot.Index, baseZxid: s.Snapshot.Zxid}
			n.applied, n.state = s.Snapshot.Index, s.Snapshot.Index
		case s.Truncate:
			p("sync: truncate after %d", s.TruncateAfter)
			n.disk.ents = n.disk.ents[:s.TruncateAfter-n.disk.base]
		}
		if len(s.Entries) > 0 {
			p("sync: append %s", entryRange(s.Entries))
			env.appendDisk(n, s.Entries)
		}
	}
	if m := rd.Membership; m != nil {
		p("persist membership %s", m.String())
		if n.membership != nil && m.Version < n.membership.Version {
			env.t.Fatalf("member %d: persisted membership goes back from %s to %s", n.id, n.membership, m)
		}
		n.membership = m
	}
	if len(rd.Committed) > 0 {
		p("apply %s", entryRange(rd.Committed))
		for _, e := range rd.Committed {
			if e.Index > n.disk.last() {
				env.t.Fatalf("member %d: entry %d handed to the applier but not on disk (disk ends at %d)", n.id, e.Index, n.disk.last())
			}
			if e.Index != n.applied+1 {
				env.t.Fatalf("member %d: entry %d applied after %d", n.id, e.Index, n.applied)
			}
			n.applied = e.Index
		}
		n.state = n.applied
	}
	if rd.Epochs != nil {
		p("persist epochs %d/%d", rd.Epochs.Accepted, rd.Epochs.Current)
		if rd.Epochs.Accepted < n.epochs.Accepted || rd.Epochs.Current < n.epochs.Current {
			env.t.Fatalf("member %d: epochs go back from %v to %v", n.id, n.epochs, *rd.Epochs)
		}
		n.epochs = *rd.Epochs
	}
	if len(rd.Entries) > 0 {
		p("write %s", entryRange(rd.Entries))
		n.writer = append(n.writer, rd.Entries...)
	}
	for _, o := range rd.Messages {
		env.checkSend(n, o)
		if n.v1 {
			o.Msg.Flags &^= FlagReadsV2
		}
		if to := env.nodes[o.To]; to != nil && to.v1 && AppendMessage(nil, &o.Msg)[0] != messageVersion1 {
			p("send %d %s: refused, %d reads version 1", o.To, formatMsg(&o.Msg), o.To)
			continue
		}
		p("send %d %s", o.To, formatMsg(&o.Msg))
		env.net = append(env.net, scriptMsg{from: n.id, to: o.To, msg: o.Msg})
	}
	for _, f := range rd.Refused {
		p("refuse req %d: %v", f.ReqID, f.Err)
	}
	if rd.FailProposals != nil {
		p("fail unapplied proposals: %v", rd.FailProposals)
	}
	for _, a := range rd.Answers {
		p("answer %d index=%d err=%v", a.ID, a.Index, a.Err)
	}
	for _, x := range rd.Transfers {
		p("transfer req %d: %v", x.ReqID, x.Err)
	}
	for _, s := range rd.SnapshotRequests {
		p("snapshot for %d", s.Peer)
		n.pendingSnaps = append(n.pendingSnaps, s)
	}
	for _, rc := range rd.RoleChanges {
		p("role %s leader=%d epoch=%d", rc.Role, rc.LeaderID, rc.Epoch)
	}
}

// checkSend enforces the rules a message must satisfy when it leaves.
func (env *scriptEnv) checkSend(n *scriptNode, o Outbound) {
	m := &o.Msg
	fail := func(format string, a ...any) {
		env.t.Fatalf("member %d sends %s to %d: "+format, append([]any{n.id, formatMsg(m), o.To}, a...)...)
	}
	switch m.Type {
	case MsgAckEpoch, MsgLeaderInfo:
		if n.epochs.Accepted < m.Epoch {
			fail("acceptedEpoch %d is not persisted (disk holds %d)", m.Epoch, n.epochs.Accepted)
		}
	case MsgAckNewLeader:
		if n.epochs.Current < m.Epoch {
			fail("currentEpoch %d is not persisted (disk holds %d)", m.Epoch, n.epochs.Current)
		}
		if m.Index > n.disk.last() {
			fail("names index %d, disk ends at %d", m.Index, n.disk.last())
		}
	case MsgAck, MsgHeartbeatAck:
		if m.Index > n.disk.last() {
			fail("names index %d, disk ends at %d", m.Index, n.disk.last())
		}
	case MsgCommit, MsgUpToDate:
		// Committed means on the disks of a quorum of the voters of the
		// sender's active configuration, and of its pending one if the
		// commit reaches that configuration's entry (the sender's
		// configurations after the Ready that sends it: a change the
		// COMMIT commits is still pending there).
		check := func(conf *Membership) {
			have := 0
			for _, id := range conf.Voters {
				if o := env.nodes[id]; o != nil && o.disk.last() >= m.Commit {
					have++
				}
			}
			if have < conf.Quorum() {
				fail("commit %d is on the disks of %d of the voters %v", m.Commit, have, conf.Voters)
			}
		}
		check(&n.core.conf)
		if nx := n.core.next; nx != nil && m.Commit >= nx.Index {
			check(nx)
		}
	case MsgNotification, MsgFollowerInfo:
		// A vote and a FOLLOWERINFO name the log they stand for, which
		// must be durable. A FOLLOWING or LEADING notification only says
		// who leads (its receiver takes no history from it), and a leader
		// under load answers a looking member while its write is in
		// flight.
		if m.Type == MsgNotification && m.State != stateLooking {
			break
		}
		if len(n.writer) > 0 {
			fail("the writer still holds %s", entryRange(n.writer))
		}
	}
}

func (env *scriptEnv) appendDisk(n *scriptNode, ents []Entry) {
	for _, e := range ents {
		if e.Index != n.disk.last()+1 {
			env.t.Fatalf("member %d: entry %d appended after %d", n.id, e.Index, n.disk.last())
		}
		n.disk.ents = append(n.disk.ents, e)
	}
}

func (env *scriptEnv) drainWriter(n *scriptNode) {
	env.appendDisk(n, n.writer)
	n.writer = nil
}

// durable makes everything the writer holds durable and tells the Core.
func (env *scriptEnv) durable(n *scriptNode, out *strings.Builder) {
	if len(n.writer) == 0 {
		return
	}
	fmt.Fprintf(out, "%d: durable %s\n", n.id, entryRange(n.writer))
	env.drainWriter(n)
	n.core.LogDurable(n.disk.last())
}

// snapshot answers the member's pending snapshot requests with its state.
func (env *scriptEnv) snapshot(n *scriptNode) {
	for _, s := range n.pendingSnaps {
		z, _ := n.disk.ZxidAt(n.state)
		n.core.SnapshotTaken(Snapshot{Peer: s.Peer, Nonce: s.Nonce, SnapshotData: SnapshotData{Index: n.state, Zxid: z, Data: []byte("state")}})
	}
	n.pendingSnaps = nil
}

// deliver steps queued messages into their receivers, in order:
// deliver [from=..] [to=..] [type=..].
func (env *scriptEnv) deliver(args map[string]string, out *strings.Builder) {
	match, rest := env.take(args)
	for _, m := range match {
		if n := env.nodes[m.to]; n != nil {
			n.core.Step(m.from, m.msg, env.now)
		}
	}
	env.net = rest
	_ = out
}

// drop loses queued messages: drop [from=..] [to=..] [type=..].
func (env *scriptEnv) drop(args map[string]string, out *strings.Builder) {
	match, rest := env.take(args)
	for _, m := range match {
		fmt.Fprintf(out, "dropped %d->%d %s\n", m.from, m.to, m.msg.Type)
	}
	env.net = rest
}

func (env *scriptEnv) take(args map[string]string) (match, rest []scriptMsg) {
	from, to := env.idList(args["from"]), env.idList(args["to"])
	for _, m := range env.net {
		ok := (len(from) == 0 || slices.Contains(from, m.from)) &&
			(len(to) == 0 || slices.Contains(to, m.to)) &&
			(args["type"] == "" || args["type"] == m.msg.Type.String())
		if ok {
			match = append(match, m)
		} else {
			rest = append(rest, m)
		}
	}
	return match, rest
}

// stabilize takes Readies, makes writes durable and delivers messages
// until nothing is left: stabilize [id=..] (only among those members;
// messages to others stay queued) [nodurable] (the writers report
// nothing) [quiet] (print nothing; the rules are still checked).
func (env *scriptEnv) stabilize(args map[string]string, out *strings.Builder) {
	ids := env.ids(args)
	_, nodurable := args["nodurable"]
	for round := 0; ; round++ {
		if round > 100 {
			env.t.Fatal("stabilize: no fixed point after 100 rounds")
		}
		before := out.Len()
		for _, id := range ids {
			env.ready(env.nodes[id], out)
		}
		if !nodurable {
			for _, id := range ids {
				env.durable(env.nodes[id], out)
			}
		}
		var match, rest []scriptMsg
		for _, m := range env.net {
			if slices.Contains(ids, m.from) && slices.Contains(ids, m.to) {
				match = append(match, m)
			} else {
				rest = append(rest, m)
			}
		}
		env.net = rest
		for _, m := range match {
			env.nodes[m.to].core.Step(m.from, m.msg, env.now)
		}
		if len(match) == 0 && out.Len() == before {
			return
		}
	}
}

func entryRange(ents []Entry) string {
	if len(ents) == 1 {
		return fmt.Sprintf("[%d %s]", ents[0].Index, FormatZxid(ents[0].Zxid))
	}
	f, l := ents[0], ents[len(ents)-1]
	return fmt.Sprintf("[%d %s .. %d %s]", f.Index, FormatZxid(f.Zxid), l.Index, FormatZxid(l.Zxid))
}

// formatMsg renders the fields of a message that the scripts follow;
// nonces, sessions and rounds are left out (they only match replies to
// requests).
func formatMsg(m *Message) string {
	var b strings.Builder
	b.WriteString(m.Type.String())
	add := func(k string, v uint64) {
		if v != 0 {
			fmt.Fprintf(&b, " %s=%d", k, v)
		}
	}
	if m.Type == MsgNotification {
		fmt.Fprintf(&b, " state=%s", [...]string{"?", "looking", "following", "leading", "observing"}[m.State])
	}
	if m.Type == MsgNotification || m.Type == MsgTransfer {
		add("leader", m.Leader)
	}
	add("epoch", uint64(m.Epoch))
	if m.Zxid != 0 {
		fmt.Fprintf(&b, " zxid=%s", FormatZxid(m.Zxid))
	}
	add("index", m.Index)
	add("commit", m.Commit)
	if m.Flags&FlagTrunc != 0 {
		b.WriteString(" TRUNC")
	}
	if m.Flags&FlagSnap != 0 {
		b.WriteString(" SNAP")
	}
	if m.Flags&FlagObserver != 0 {
		b.WriteString(" observer")
	}
	if len(m.Entries) > 0 {
		b.WriteString(" " + entryRange(m.Entries))
	}
	add("req", m.ReqID)
	if m.Err != "" {
		fmt.Fprintf(&b, " err=%q", m.Err)
	}
	return b.String()
}
