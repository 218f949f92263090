package zab

// Transport carries messages between the members of an ensemble.
//
// Delivery is best-effort: a message may be lost, and (with the in-memory
// test transport) delayed, duplicated or reordered. The protocol tolerates
// all of that: every message names the epoch and synchronization session
// it belongs to, stale ones are ignored, and anything lost is resent on a
// timer. A transport must never alter a message, and must never deliver a
// message as coming from a member that did not send it.
type Transport interface {
	// Send queues m for member to. It never blocks for long: when the peer
	// is unreachable or its queue is full, the message is dropped. Send is
	// safe for concurrent use; the transport owns m afterwards.
	Send(to uint64, m Message)
	// Receive returns the channel of messages for this member. It is
	// closed when the transport is closed.
	Receive() <-chan Envelope
	// Close stops the transport and releases its connections.
	Close() error
}

// PeerSetter is a Transport whose peers follow the configuration: the
// driver calls SetPeers with the address of every member of the
// configurations in play whenever they change. A transport that reaches
// members some other way (MemNetwork) need not implement it.
type PeerSetter interface {
	// SetPeers makes peers (ID → address; this member's own entry is
	// ignored) the members messages go to: a new one is dialed, one whose
	// address changed is dialed there, and one no longer named is sent
	// what is already queued for it, then only what the protocol answers
	// it (a removed member still looking learns of its removal that way).
	SetPeers(peers map[uint64]string)
}
