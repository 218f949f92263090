package zab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
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
	// FlagReadsV2 in a FOLLOWERINFO says the sender decodes message
	// version 2 (entries with their kind, configurations); a member of an
	// older version does not send it.
	FlagReadsV2
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
	// a follower synchronized by SNAP cannot find in its log; in a
	// notification, the sender's active configuration once it is not the
	// starting one. The starting configuration (version 0) is never sent:
	// every member has it from its flags, and the encoding leaves it out.
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
//
// Version 2 adds, for each entry, its kind (a uvarint after ReqID), and
// after the entries the configuration: a uvarint 0 for none, or 1 followed
// by its version, its index (uvarints), EncodeMembership's bytes
// (length-prefixed) and its time (a varint). A version-1 binary refuses a version-2 message as
// malformed, so a message is encoded in version 1 unless it carries what
// only version 2 can (an entry that is not a state machine payload, or a
// configuration other than the starting one): until the first membership
// change, a member of this version talks to one of the last as before,
// and a leader proposes no change until every member it keeps has
// announced that it reads version 2 (FlagReadsV2). Both versions are
// decoded.
const (
	messageVersion1 = 1
	messageVersion  = 2 // the latest this binary reads
)

// ErrBadMessage is returned by DecodeMessage for bytes that are not a
// well-formed message.
var ErrBadMessage = errors.New("zab: malformed message")

// AppendMessage appends m's encoding to dst, in the lowest version that
// carries it.
func AppendMessage(dst []byte, m *Message) []byte {
	conf := m.Membership
	if conf != nil && conf.Version == 0 {
		conf = nil // the starting configuration, which every member has
	}
	version := byte(messageVersion1)
	if conf != nil || slices.ContainsFunc(m.Entries, func(e Entry) bool { return e.Kind != EntryData }) {
		version = messageVersion
	}
	dst = append(dst, version, byte(m.Type), m.Flags, m.State)
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
		if version >= 2 {
			dst = binary.AppendUvarint(dst, uint64(e.Kind))
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Data)))
		dst = append(dst, e.Data...)
	}
	if version >= 2 {
		if conf == nil {
			return append(dst, 0)
		}
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, conf.Version)
		dst = binary.AppendUvarint(dst, conf.Index)
		data := EncodeMembership(*conf)
		dst = binary.AppendUvarint(dst, uint64(len(data)))
		dst = append(dst, data...)
		dst = binary.AppendVarint(dst, conf.Time)
	}
	return dst
}

// DecodeMessage decodes one message that fills b. Data, Err and entry
// payloads are copied out of b. It never panics, whatever b holds.
func DecodeMessage(b []byte) (Message, error) {
	d := decoder{b: b}
	var m Message
	version := d.byte()
	if version != messageVersion1 && version != messageVersion {
		return m, fmt.Errorf("%w: version %d", ErrBadMessage, version)
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
			if version >= 2 {
				if k := d.uvarint(); k < uint64(entryKindEnd) {
					e.Kind = EntryKind(k)
				} else {
					d.fail(fmt.Sprintf("entry %d of unknown kind %d", e.Index, k))
				}
			}
			e.Data = d.bytes()
		}
	}
	if version >= 2 {
		m.Membership = d.membership()
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

// membership decodes an optional configuration (see AppendMessage).
func (d *decoder) membership() *Membership {
	switch d.byte() {
	case 0:
		return nil
	case 1:
	default:
		d.fail("bad configuration marker")
		return nil
	}
	version, index := d.uvarint(), d.uvarint()
	data := d.bytes()
	time := d.varint()
	if d.err != nil {
		return nil
	}
	if version == 0 || index == 0 {
		// The starting configuration is never sent; any other has an entry.
		d.fail(fmt.Sprintf("configuration version %s at index %d", FormatZxid(version), index))
		return nil
	}
	m, err := membershipOf(Entry{Index: index, Zxid: version, Time: time, Kind: EntryMembership, Data: data})
	if err != nil {
		d.fail(err.Error())
		return nil
	}
	return &m
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
