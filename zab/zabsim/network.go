package zabsim

import (
	"math/rand/v2"

	"github.com/januskv/janus/zab"
)

// network is the simulated network between members. Every message gets a
// random delay, so messages between the same two members reorder; while
// lossy it also drops some, delivers some twice and holds some back far
// longer; cut links drop everything sent over them, including what is
// already in flight when the link is cut.
type network struct {
	seed uint64
	// Each message's fate is drawn from (seed, link, type, send time,
	// count at that time): removing an event from a trace changes the
	// fates of the messages it changes, not of every later message (ticks,
	// and so heartbeats, keep their times). sent counts this instant's
	// messages per link.
	sent   map[[2]uint64]uint64
	sentAt int64
	// cut[from][to] blocks messages from → to.
	cut map[[2]uint64]bool
	// dropPct is the drop percentage while lossy; 0 when calm.
	dropPct int
	stats   *Stats
}

// Delivery latencies in virtual milliseconds.
const (
	minDelay  = 1
	maxDelay  = 20
	longDelay = 400 // the tail of a lossy network: held back, so overtaken
)

func newNetwork(seed uint64, stats *Stats) *network {
	return &network{seed: seed, sent: map[[2]uint64]uint64{}, cut: map[[2]uint64]bool{}, stats: stats}
}

// plan returns when copies of one message sent now arrive: none if it is
// dropped, two if it is duplicated.
func (n *network) plan(from, to uint64, typ zab.MsgType, now int64) []int64 {
	if n.cut[[2]uint64{from, to}] {
		n.stats.Faults["drop-cut"]++
		return nil
	}
	if now != n.sentAt {
		clear(n.sent)
		n.sentAt = now
	}
	link := [2]uint64{from, to}
	n.sent[link]++
	rng := dice(n.seed, uint64(typ)<<56|from<<28|to, uint64(now)<<16|n.sent[link])
	copies := 1
	if n.dropPct > 0 {
		switch p := rng.IntN(100); {
		case p < n.dropPct:
			n.stats.Faults["drop"]++
			return nil
		case p < n.dropPct+10:
			n.stats.Faults["duplicate"]++
			copies = 2
		}
	}
	at := make([]int64, copies)
	for i := range at {
		d := int64(minDelay + rng.IntN(maxDelay-minDelay+1))
		if n.dropPct > 0 && rng.IntN(10) == 0 {
			n.stats.Faults["delay"]++
			d += int64(rng.IntN(longDelay))
		}
		at[i] = now + d
	}
	return at
}

// open reports whether a message from → to may be delivered now.
func (n *network) open(from, to uint64) bool {
	if n.cut[[2]uint64{from, to}] {
		n.stats.Faults["drop-cut"]++
		return false
	}
	return true
}

// partition cuts group off from the others; oneWay cuts only what group
// sends. Cuts add up until heal.
func (n *network) partition(group, all []uint64, oneWay bool) {
	in := map[uint64]bool{}
	for _, id := range group {
		in[id] = true
	}
	for _, a := range all {
		for _, b := range all {
			if in[a] && !in[b] {
				n.cut[[2]uint64{a, b}] = true
				if !oneWay {
					n.cut[[2]uint64{b, a}] = true
				}
			}
		}
	}
}

func (n *network) heal() { clear(n.cut) }

// dice returns the random source of one decision: the run's seed, a
// stream (a link, a member's disk) and a count within it.
func dice(seed, stream, count uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^stream*0x9e3779b97f4a7c15, count))
}

// copyMessage gives each delivery its own copy: a receiver owns what it is
// delivered and may keep or change it.
func copyMessage(m zab.Message) zab.Message {
	if m.Data != nil {
		m.Data = append([]byte(nil), m.Data...)
	}
	if m.Entries != nil {
		m.Entries = copyEntries(m.Entries)
	}
	return m
}

func copyEntries(ents []zab.Entry) []zab.Entry {
	out := make([]zab.Entry, len(ents))
	copy(out, ents)
	for i := range out {
		if out[i].Data != nil {
			out[i].Data = append([]byte(nil), out[i].Data...)
		}
	}
	return out
}
