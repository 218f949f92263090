package zab

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MsgType says what a Message is. The names follow ZooKeeper's Zab
// implementation where one exists.
type MsgType uint8

const (
	// Election.
	MsgNotification MsgType = iota + 1 // a vote, and the sender's state
	// Discovery.
	MsgFollowerInfo // follower → leader: acceptedEpoch, lastZxid
	MsgLeaderInfo   // leader → follower: the new epoch
	MsgAckEpoch     // follower → leader: currentEpoch, lastZxid (after persisting acceptedEpoch)
	// Synchronization.
	MsgSync         // leader → follower: TRUNC and/or SNAP and DIFF, then NEWLEADER, in one message
	MsgAckNewLeader // follower → leader: synchronized, currentEpoch persisted
	MsgUpToDate     // leader → follower: a quorum is synchronized; broadcast begins
	// Broadcast.
	MsgProposal     // leader → follower: entries to log
	MsgAck          // follower → leader: everything through Index is on disk
	MsgCommit       // leader → follower: everything through Commit is committed
	MsgHeartbeat    // leader → follower: liveness, commit index, read-index round
	MsgHeartbeatAck // follower → leader
	// Services.
	MsgRequest       // follower → leader: a forwarded proposal
	MsgRequestFail   // leader → origin: the forwarded proposal was refused
	MsgReadIndex     // follower → leader
	MsgReadIndexResp // leader → follower
	MsgCall          // follower → leader: a leader RPC
	MsgCallResp      // leader → follower
	// Leader transfer.
	MsgTransfer // leader → synchronized peers: Leader takes over; look for a leader now, preferring it (Epoch, Zxid: its history)
	msgTypeEnd
)

var msgTypeNames = [...]string{
	MsgNotification: "NOTIFICATION", MsgFollowerInfo: "FOLLOWERINFO", MsgLeaderInfo: "LEADERINFO",
	MsgAckEpoch: "ACKEPOCH", MsgSync: "SYNC", MsgAckNewLeader: "ACKNEWLEADER", MsgUpToDate: "UPTODATE",
	MsgProposal: "PROPOSAL", MsgAck: "ACK", MsgCommit: "COMMIT", MsgHeartbeat: "HEARTBEAT",
	MsgHeartbeatAck: "HEARTBEATACK", MsgRequest: "REQUEST", MsgRequestFail: "REQUESTFAIL",
	MsgReadIndex: "READINDEX", MsgReadIndexResp: "READINDEXRESP", MsgCall: "CALL", MsgCallResp: "CALLRESP",
	MsgTransfer: "TRANSFER",
}

func (t MsgType) String() string {
	if t > 0 && t < msgTypeEnd {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// Message flags.
const (
	FlagObserver uint8 = 1 << iota // FOLLOWERINFO from an observer
	FlagTrunc                      // SYNC: truncate the log after Index first
	FlagSnap                       // SYNC: restore Data as a snapshot at Index/Zxid first
)

// Peer states carried by notifications.
const (
	stateLooking uint8 = iota + 1
	stateFollowing
	stateLeading
	stateObserving
)

// Message is one peer-to-peer message. It is a flat union: each type uses
// the fields its comment in MsgType names, the rest are zero. Messages are
// values owned by the receiver once delivered; senders must not modify
// Data or Entries after Send.
type Message struct {
	Type  MsgType
	Flags uint8
	State uint8  // notifications: the sender's state
	Epoch uint32 // the epoch the message belongs to (a vote's peer epoch in notifications)
	// Round is the election round of a notification.
	Round  uint64
	Leader uint64 // the voted-for or followed leader
	Zxid   uint64
	Index  uint64
	Commit uint64
	// Seq is the synchronization session (SYNC and everything a follower
	// sends under it) or a heartbeat round.
	Seq uint64
	// Nonce identifies one attempt of a follower to join a leader, or one
	// ReadIndex or Call request.
	Nonce   uint64
	Origin  uint64
	ReqID   uint64
	Err     string
	Data    []byte
	Entries []Entry
	// Membership is, in a SYNC, the leader's active configuration, which
	// a follower synchronized by SNAP cannot find in its log. It is not
	// in the wire encoding yet (see "Membership changes" in the design):
	// until it is, only a simulated or scripted ensemble changes its
	// configuration.
	Membership *Membership
}

// Envelope is a received message and its sender.
type Envelope struct {
	From uint64
	Msg  Message
}

// The encoding is a version byte, the type, flags and state bytes, then
// every numeric field as a uvarint, then Err, Data and the entries, each
// length-prefixed. Zero fields cost one byte, which keeps the common
// messages (acks, heartbeats) around 20 bytes.
const messageVersion = 1

// ErrBadMessage is returned by DecodeMessage for bytes that are not a
// well-formed message.
var ErrBadMessage = errors.New("zab: malformed message")

// AppendMessage appends m's encoding to dst.
func AppendMessage(dst []byte, m *Message) []byte {
	dst = append(dst, messageVersion, byte(m.Type), m.Flags, m.State)
	for _, v := range [...]uint64{uint64(m.Epoch), m.Round, m.Leader, m.Zxid, m.Index, m.Commit, m.Seq, m.Nonce, m.Origin, m.ReqID} {
		dst = binary.AppendUvarint(dst, v)
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Err)))
	dst = append(dst, m.Err...)
	dst = binary.AppendUvarint(dst, uint64(len(m.Data)))
	dst = append(dst, m.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		dst = binary.AppendUvarint(dst, e.Index)
		dst = binary.AppendUvarint(dst, e.Zxid)
		dst = binary.AppendVarint(dst, e.Time)
		dst = binary.AppendUvarint(dst, e.Origin)
		dst = binary.AppendUvarint(dst, e.ReqID)
		dst = binary.AppendUvarint(dst, uint64(len(e.Data)))
		dst = append(dst, e.Data...)
	}
	return dst
}

// DecodeMessage decodes one message that fills b. Data, Err and entry
// payloads are copied out of b. It never panics, whatever b holds.
func DecodeMessage(b []byte) (Message, error) {
	d := decoder{b: b}
	var m Message
	if v := d.byte(); v != messageVersion {
		return m, fmt.Errorf("%w: version %d", ErrBadMessage, v)
	}
	m.Type, m.Flags, m.State = MsgType(d.byte()), d.byte(), d.byte()
	epoch := d.uvarint()
	if epoch > 1<<32-1 {
		d.fail("epoch out of range")
	}
	m.Epoch = uint32(epoch)
	for _, p := range [...]*uint64{&m.Round, &m.Leader, &m.Zxid, &m.Index, &m.Commit, &m.Seq, &m.Nonce, &m.Origin, &m.ReqID} {
		*p = d.uvarint()
	}
	m.Err = string(d.bytes())
	m.Data = d.bytes()
	n := d.uvarint()
	// Each entry takes at least seven bytes, which bounds the allocation
	// a hostile count can cause.
	if n > uint64(len(d.b)-d.off)/7 {
		d.fail("entry count exceeds the message")
	}
	if d.err == nil && n > 0 {
		m.Entries = make([]Entry, n)
		for i := range m.Entries {
			e := &m.Entries[i]
			e.Index, e.Zxid, e.Time = d.uvarint(), d.uvarint(), d.varint()
			e.Origin, e.ReqID = d.uvarint(), d.uvarint()
			e.Data = d.bytes()
		}
	}
	if d.err == nil && d.off != len(b) {
		d.fail("trailing bytes")
	}
	if d.err == nil && (m.Type == 0 || m.Type >= msgTypeEnd) {
		d.fail(fmt.Sprintf("unknown type %d", m.Type))
	}
	if d.err != nil {
		return Message{}, d.err
	}
	return m, nil
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", ErrBadMessage, why, d.off)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("length exceeds the message")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]byte, n)
	copy(out, d.b[d.off:])
	d.off += int(n)
	return out
}
