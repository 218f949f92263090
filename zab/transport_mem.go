package zab

import (
	"math/rand/v2"
	"sync"
	"time"
)

// MemNetwork connects in-process members for tests, with fault injection:
// messages may be dropped, duplicated and delayed (which reorders them),
// and the network may be partitioned. Every message is encoded and decoded
// on the way, so receivers never share memory with senders.
type MemNetwork struct {
	mu        sync.Mutex
	rng       *rand.Rand
	endpoints map[uint64]*memEndpoint
	faults    Faults
	group     map[uint64]int // partition group per member; absent = group 0
	timers    sync.WaitGroup
	sent      uint64
}

// Faults are the probabilities and delays a MemNetwork applies to each
// message.
type Faults struct {
	Drop      float64       // probability a message is lost
	Duplicate float64       // probability a message is delivered twice
	MaxDelay  time.Duration // each delivery waits a random time up to this
}

// NewMemNetwork returns a fault-free network whose random choices follow
// seed.
func NewMemNetwork(seed uint64) *MemNetwork {
	return &MemNetwork{
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		endpoints: make(map[uint64]*memEndpoint),
		group:     make(map[uint64]int),
	}
}

// SetFaults sets the faults applied to messages sent from now on.
func (n *MemNetwork) SetFaults(f Faults) {
	n.mu.Lock()
	n.faults = f
	n.mu.Unlock()
}

// Partition splits the network: members in different groups cannot reach
// each other; members in no group form one more group together.
func (n *MemNetwork) Partition(groups ...[]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = make(map[uint64]int)
	for i, g := range groups {
		for _, id := range g {
			n.group[id] = i + 1
		}
	}
}

// Heal removes every partition.
func (n *MemNetwork) Heal() { n.Partition() }

// Sent returns how many messages have been sent (for tests that wait for
// traffic rather than time).
func (n *MemNetwork) Sent() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sent
}

// Endpoint returns member id's transport, replacing (and closing) any
// earlier one, as a restarted process would.
func (n *MemNetwork) Endpoint(id uint64) Transport {
	ep := &memEndpoint{net: n, id: id, ch: make(chan Envelope, 8192)}
	n.mu.Lock()
	old := n.endpoints[id]
	n.endpoints[id] = ep
	n.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return ep
}

// Wait waits for every delayed delivery to finish (call after closing the
// members).
func (n *MemNetwork) Wait() { n.timers.Wait() }

func (n *MemNetwork) send(from, to uint64, m Message) {
	wire := AppendMessage(nil, &m)
	n.mu.Lock()
	n.sent++
	if n.group[from] != n.group[to] || n.rng.Float64() < n.faults.Drop {
		n.mu.Unlock()
		return
	}
	copies := 1
	if n.rng.Float64() < n.faults.Duplicate {
		copies = 2
	}
	delays := make([]time.Duration, copies)
	for i := range delays {
		if n.faults.MaxDelay > 0 {
			delays[i] = time.Duration(n.rng.Int64N(int64(n.faults.MaxDelay)))
		}
	}
	n.mu.Unlock()
	for _, d := range delays {
		if d == 0 {
			n.deliver(from, to, wire)
			continue
		}
		n.timers.Add(1)
		time.AfterFunc(d, func() {
			defer n.timers.Done()
			n.deliver(from, to, wire)
		})
	}
}

func (n *MemNetwork) deliver(from, to uint64, wire []byte) {
	n.mu.Lock()
	ep := n.endpoints[to]
	cut := n.group[from] != n.group[to]
	n.mu.Unlock()
	if ep == nil || cut {
		return
	}
	m, err := DecodeMessage(wire)
	if err != nil {
		panic("zab: MemNetwork: message does not survive its own encoding: " + err.Error())
	}
	ep.put(Envelope{From: from, Msg: m})
}

type memEndpoint struct {
	net    *MemNetwork
	id     uint64
	mu     sync.Mutex
	closed bool
	ch     chan Envelope
}

func (e *memEndpoint) Send(to uint64, m Message) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if !closed {
		e.net.send(e.id, to, m)
	}
}

func (e *memEndpoint) put(env Envelope) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	select {
	case e.ch <- env:
	default: // a full queue drops, like a congested network
	}
}

func (e *memEndpoint) Receive() <-chan Envelope { return e.ch }

func (e *memEndpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.ch)
	}
	return nil
}
