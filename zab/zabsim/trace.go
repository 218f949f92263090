package zabsim

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Kind is what an external event does: the faults and the workload the
// scheduler injects, as opposed to the protocol's own events (message
// deliveries, ticks, fsync completions, applier steps), which follow from
// them and from the seed.
type Kind uint8

const (
	// EvPropose makes Member propose Arg entries, one after the other.
	EvPropose Kind = iota + 1
	// EvCrash stops Member as a power loss would: its unsynced log group
	// keeps Arg percent of its entries (a torn write), anything not yet
	// handed to the disk is lost, and its state machine keeps a prefix of
	// what it applied since it last synced.
	EvCrash
	// EvRestart reopens Member from its simulated disk, if it is down.
	EvRestart
	// EvPowerCut crashes every member of Group at once, each keeping Arg
	// percent of its unsynced group.
	EvPowerCut
	// EvPartition cuts Group off from the rest, both ways.
	EvPartition
	// EvOneWay drops everything Group sends to the rest (not the reverse).
	EvOneWay
	// EvHeal restores every link.
	EvHeal
	// EvLossy makes the network drop, duplicate and hold back messages
	// (Arg is the drop percentage) until EvCalm.
	EvLossy
	// EvCalm ends EvLossy.
	EvCalm
	// EvTrim makes Member's state machine durable and trims its log up to
	// Arg entries below what it applied, so lagging members need SNAP.
	EvTrim
	// EvRead asks Member for a read index (ReadIndex).
	EvRead
	// EvReconfig has the leader of the moment (if any) propose a
	// membership change about Member: Arg is ReconfigAdd (a spare that was
	// never a member joins as an observer, and is started), ReconfigPromote
	// (an observer becomes a voter) or ReconfigRemove (a member leaves,
	// the leader included). A change that does not apply to the active
	// configuration, or while one is pending, does nothing.
	EvReconfig
	// EvTransfer has the leader of the moment (if any) transfer its
	// leadership to Member (etcd's MoveLeader). A Member that is not a
	// voter of the leader's active configuration is replaced by one that
	// is (by its ID), unless Arg is 1: then the leader is asked as is,
	// and must refuse.
	EvTransfer
	kindEnd
)

var kindNames = [...]string{
	EvPropose: "propose", EvCrash: "crash", EvRestart: "restart", EvPowerCut: "powercut",
	EvPartition: "partition", EvOneWay: "oneway", EvHeal: "heal", EvLossy: "lossy", EvCalm: "calm",
	EvTrim: "trim", EvRead: "read", EvReconfig: "reconfig", EvTransfer: "transfer",
}

// The changes an EvReconfig makes (its Arg).
const (
	ReconfigAdd = iota + 1
	ReconfigPromote
	ReconfigRemove
)

func (k Kind) String() string {
	if k > 0 && k < kindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// fault reports whether removing the event removes a fault (the shrinker
// removes faults before workload).
func (k Kind) fault() bool { return k != EvPropose && k != EvRead }

// followUp reports whether the event ends a fault (the generator draws
// these together with the fault).
func (k Kind) followUp() bool { return k == EvRestart || k == EvHeal || k == EvCalm }

// Event is one external event of a run, at a virtual time.
type Event struct {
	At     int64
	Kind   Kind
	Member uint64   // EvPropose, EvCrash, EvRestart, EvTrim, EvReconfig, EvTransfer
	Group  []uint64 // EvPowerCut, EvPartition, EvOneWay
	Arg    int
}

func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.At, e.Kind)
	if e.Member != 0 {
		fmt.Fprintf(&b, " m=%d", e.Member)
	}
	if len(e.Group) > 0 {
		ids := make([]string, len(e.Group))
		for i, id := range e.Group {
			ids[i] = strconv.FormatUint(id, 10)
		}
		fmt.Fprintf(&b, " g=%s", strings.Join(ids, ","))
	}
	if e.Arg != 0 {
		fmt.Fprintf(&b, " arg=%d", e.Arg)
	}
	return b.String()
}

// Trace is everything that decides a run: the seed (the network's delays
// and losses, the clocks' drift, the disks' latencies, each member's
// protocol randomness), the ensemble, the length of the faulty phase and
// the external events. Replaying a trace replays the run exactly.
type Trace struct {
	Seed      uint64
	Voters    int
	Observers int
	// Spares are members that start outside the ensemble (IDs after the
	// voters and observers), for EvReconfig to add. A trace with spares
	// has membership changes drawn among its faults.
	Spares int
	Steps  int
	Events []Event
}

// Format writes the trace as text that ParseTrace reads back: a header
// line, then one event per line.
func (t *Trace) Format(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "seed=%d voters=%d observers=%d steps=%d\n", t.Seed, t.Voters, t.Observers, t.Steps)
	if t.Spares > 0 {
		fmt.Fprintf(bw, "spares=%d\n", t.Spares)
	}
	for _, e := range t.Events {
		fmt.Fprintln(bw, e.String())
	}
	return bw.Flush()
}

func (t *Trace) String() string {
	var b strings.Builder
	_ = t.Format(&b)
	return b.String()
}

// ParseTrace reads a trace written by Format.
func ParseTrace(r io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(r)
	t := &Trace{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if t.Voters == 0 {
			if _, err := fmt.Sscanf(text, "seed=%d voters=%d observers=%d steps=%d", &t.Seed, &t.Voters, &t.Observers, &t.Steps); err != nil {
				return nil, fmt.Errorf("trace line %d: header: %w", line, err)
			}
			if t.Voters <= 0 {
				return nil, fmt.Errorf("trace line %d: no voters", line)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(text, "spares="); ok && len(t.Events) == 0 && t.Spares == 0 {
			n, err := strconv.Atoi(rest)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("trace line %d: spares %q", line, rest)
			}
			t.Spares = n
			continue
		}
		e, err := parseEvent(text)
		if err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		t.Events = append(t.Events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	if t.Voters == 0 {
		return nil, fmt.Errorf("trace: no header")
	}
	if !slices.IsSortedFunc(t.Events, func(a, b Event) int { return int(a.At - b.At) }) {
		return nil, fmt.Errorf("trace: events out of time order")
	}
	return t, nil
}

func parseEvent(text string) (Event, error) {
	f := strings.Fields(text)
	if len(f) < 2 {
		return Event{}, fmt.Errorf("event %q: want time and kind", text)
	}
	var e Event
	at, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: time: %w", text, err)
	}
	e.At = at
	for k := Kind(1); k < kindEnd; k++ {
		if k.String() == f[1] {
			e.Kind = k
		}
	}
	if e.Kind == 0 {
		return Event{}, fmt.Errorf("event %q: unknown kind %q", text, f[1])
	}
	for _, kv := range f[2:] {
		key, val, ok := strings.Cut(kv, "=")
		if !ok {
			return Event{}, fmt.Errorf("event %q: %q is not key=value", text, kv)
		}
		switch key {
		case "m":
			e.Member, err = strconv.ParseUint(val, 10, 64)
		case "arg":
			e.Arg, err = strconv.Atoi(val)
		case "g":
			for _, s := range strings.Split(val, ",") {
				id, perr := strconv.ParseUint(s, 10, 64)
				if perr != nil {
					err = perr
					break
				}
				e.Group = append(e.Group, id)
			}
		default:
			err = fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return Event{}, fmt.Errorf("event %q: %w", text, err)
		}
	}
	return e, nil
}
