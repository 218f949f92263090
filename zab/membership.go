package zab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Errors that refuse a membership change; nothing was proposed.
var (
	// ErrNotLeader refuses a membership change or a leader transfer asked
	// of a member that does not lead: both are decided by the leader
	// alone.
	ErrNotLeader = errors.New("zab: this member does not lead")
	// ErrChangePending refuses a change while another has not committed.
	ErrChangePending = errors.New("zab: a membership change is still pending")
	// ErrStaleMembership refuses a change that names a version other than
	// the active configuration's.
	ErrStaleMembership = errors.New("zab: membership version is not the active one")
	// ErrNotCaughtUp refuses promoting an observer that is not
	// synchronized, or still too far behind the leader's log.
	ErrNotCaughtUp = errors.New("zab: the observer to promote has not caught up")
	// ErrPeersTooOld refuses the first change (the active configuration
	// is the starting one) while a member it keeps has not announced to
	// this leader that it reads configuration entries (message version
	// 2): it runs an older version, or has not joined this leader since
	// the leader was elected. An older member could not follow the
	// ensemble once configurations are in its messages.
	ErrPeersTooOld = errors.New("zab: a member has not announced that it reads membership changes")
)

// Membership is one configuration of the ensemble: who votes and who only
// observes. A configuration changes through the log (see the "Membership
// changes" section of docs/design.md): it takes effect when its entry
// commits, and while that entry is pending every quorum is counted in both
// the active configuration and the pending one.
type Membership struct {
	// Version is the zxid of the log entry that carries the configuration
	// (ZooKeeper's config version); 0 for the one a member was started
	// with.
	Version uint64
	// Index is the index of that entry; 0 for the starting configuration.
	Index uint64
	// Time is that entry's Time: the leader's clock (unix milliseconds)
	// when it accepted the change, the same on every member; 0 for the
	// starting configuration. ZooKeeper shows it as /zookeeper/config's
	// mtime.
	Time      int64
	Voters    []uint64 // sorted, at least one
	Observers []uint64 // sorted, none of them a voter
	// Addrs is every member's peer address (voters and observers), by ID.
	Addrs map[uint64]string
	// Meta is, per member, data zab carries without reading it: the
	// server keeps each member's name and client addresses there.
	Meta map[uint64][]byte
	// LastID is the highest member ID any configuration of this ensemble
	// has named: a member added later gets a higher one, so that an ID
	// never names two members.
	LastID uint64
}

// NewMembership returns the configuration of voters and observers, sorted,
// or an error if it is not one (no voter, an ID twice or in both roles, ID
// 0). Its LastID is its highest ID; it has no addresses.
func NewMembership(voters, observers []uint64) (Membership, error) {
	m := Membership{Voters: slices.Clone(voters), Observers: slices.Clone(observers)}
	slices.Sort(m.Voters)
	slices.Sort(m.Observers)
	if len(m.Voters) == 0 {
		return Membership{}, fmt.Errorf("zab: membership without voters")
	}
	all := append(slices.Clone(m.Voters), m.Observers...)
	slices.Sort(all)
	for i, id := range all {
		if id == 0 {
			return Membership{}, fmt.Errorf("zab: membership names member 0")
		}
		if i > 0 && all[i-1] == id {
			return Membership{}, fmt.Errorf("zab: membership names member %d twice", id)
		}
	}
	m.LastID = all[len(all)-1]
	return m, nil
}

// members returns the voters, then the observers: the order of the
// per-member fields in the encoding.
func (m *Membership) members() []uint64 {
	return append(slices.Clone(m.Voters), m.Observers...)
}

// IsVoter reports whether id votes in m.
func (m *Membership) IsVoter(id uint64) bool {
	_, ok := slices.BinarySearch(m.Voters, id)
	return ok
}

// IsMember reports whether id votes or observes in m.
func (m *Membership) IsMember(id uint64) bool {
	_, ok := slices.BinarySearch(m.Observers, id)
	return ok || m.IsVoter(id)
}

// Quorum is the number of voters that make a majority of m.
func (m *Membership) Quorum() int { return len(m.Voters)/2 + 1 }

// hasQuorum reports whether a majority of m's voters satisfy has.
func (m *Membership) hasQuorum(has func(id uint64) bool) bool {
	n := 0
	for _, id := range m.Voters {
		if has(id) {
			n++
		}
	}
	return n >= m.Quorum()
}

// quorumValue returns the highest value that a majority of m's voters
// have reached, given each voter's value (ok false: it has none), and
// false if fewer than a majority have one.
func (m *Membership) quorumValue(value func(id uint64) (uint64, bool)) (uint64, bool) {
	vals := make([]uint64, 0, len(m.Voters))
	for _, id := range m.Voters {
		if v, ok := value(id); ok {
			vals = append(vals, v)
		}
	}
	q := m.Quorum()
	if len(vals) < q {
		return 0, false
	}
	slices.Sort(vals)
	return vals[len(vals)-q], true
}

func (m *Membership) String() string {
	return fmt.Sprintf("v%s voters=%v observers=%v", FormatZxid(m.Version), m.Voters, m.Observers)
}

// EncodeMembership returns the Data of an EntryMembership entry for m: the
// voters, then the observers, each as a count and IDs (uvarints); then
// LastID; then for each member in that order its address and its Meta,
// each as a length and bytes. Version, Index and Time are not in it: they
// are the entry's zxid, index and time.
func EncodeMembership(m Membership) []byte {
	var b []byte
	for _, ids := range [][]uint64{m.Voters, m.Observers} {
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			b = binary.AppendUvarint(b, id)
		}
	}
	b = binary.AppendUvarint(b, m.LastID)
	for _, id := range m.members() {
		b = binary.AppendUvarint(b, uint64(len(m.Addrs[id])))
		b = append(b, m.Addrs[id]...)
		b = binary.AppendUvarint(b, uint64(len(m.Meta[id])))
		b = append(b, m.Meta[id]...)
	}
	return b
}

// membershipOf decodes the configuration an EntryMembership entry carries.
func membershipOf(e Entry) (Membership, error) {
	m, err := decodeMembership(e.Data)
	if err != nil {
		return Membership{}, fmt.Errorf("zab: membership entry %d: %w", e.Index, err)
	}
	m.Version, m.Index, m.Time = e.Zxid, e.Index, e.Time
	return m, nil
}

// decodeMembership decodes what EncodeMembership encoded.
func decodeMembership(b []byte) (Membership, error) {
	malformed := errors.New("malformed")
	uvarint := func() (uint64, error) {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, malformed
		}
		b = b[k:]
		return v, nil
	}
	bytesField := func() ([]byte, error) {
		n, err := uvarint()
		if err != nil || n > uint64(len(b)) {
			return nil, malformed
		}
		v := b[:n:n]
		b = b[n:]
		return v, nil
	}
	var lists [2][]uint64
	for i := range lists {
		n, err := uvarint()
		if err != nil || n > uint64(len(b)) {
			return Membership{}, malformed
		}
		for range n {
			id, err := uvarint()
			if err != nil {
				return Membership{}, malformed
			}
			lists[i] = append(lists[i], id)
		}
	}
	m, err := NewMembership(lists[0], lists[1])
	if err != nil {
		return Membership{}, err
	}
	last, err := uvarint()
	if err != nil {
		return Membership{}, malformed
	}
	if last < m.LastID {
		return Membership{}, fmt.Errorf("last member ID %d below member %d", last, m.LastID)
	}
	m.LastID = last
	for _, id := range append(slices.Clone(lists[0]), lists[1]...) {
		addr, err := bytesField()
		if err != nil {
			return Membership{}, err
		}
		meta, err := bytesField()
		if err != nil {
			return Membership{}, err
		}
		if len(addr) > 0 {
			if m.Addrs == nil {
				m.Addrs = make(map[uint64]string)
			}
			m.Addrs[id] = string(addr)
		}
		if len(meta) > 0 {
			if m.Meta == nil {
				m.Meta = make(map[uint64][]byte)
			}
			m.Meta[id] = slices.Clone(meta)
		}
	}
	if len(b) != 0 {
		return Membership{}, fmt.Errorf("%d bytes after the configuration", len(b))
	}
	return m, nil
}
