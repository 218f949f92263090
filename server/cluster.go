package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zab"
)

// The configuration as clients see it (core.Cluster) lives in zab's
// Membership: the voters and observers, each one's peer address, and per
// member an opaque Meta where the server keeps what only the faces read
// (name, client addresses). The starting configuration (version 0) has no
// Meta: it comes from the flags, as members() shows it.

// metaVersion leads every encoded Meta, so that a later server can add
// fields and still read these.
const metaVersion byte = 1

// encodeMeta returns the Meta zab keeps for c: a version byte, then Name,
// EtcdURL, ZKAddr and ZKElectionAddr, each a uvarint length and bytes.
func encodeMeta(c core.ClusterMember) []byte {
	b := []byte{metaVersion}
	for _, s := range []string{c.Name, c.EtcdURL, c.ZKAddr, c.ZKElectionAddr} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// decodeMeta fills c's fields from meta. A Meta it cannot read (damaged,
// or of a later version) leaves them empty: every member decodes the same
// bytes alike, and a member shown without a name still serves.
func decodeMeta(c *core.ClusterMember, meta []byte) error {
	if len(meta) == 0 {
		return nil
	}
	if meta[0] != metaVersion {
		return fmt.Errorf("server: member %d: meta version %d", c.ID, meta[0])
	}
	b := meta[1:]
	var fields [4]string
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return fmt.Errorf("server: member %d: malformed meta", c.ID)
		}
		fields[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	c.Name, c.EtcdURL, c.ZKAddr, c.ZKElectionAddr = fields[0], fields[1], fields[2], fields[3]
	return nil
}

// single reports whether this member was started without peers, and so
// without a peer address: it cannot change its ensemble, as a peer added
// to it could not reach it. A member started with --peers naming only
// itself is a single member too, but one that can grow.
func (m *Member) single() bool {
	return len(m.cfg.Peers) == 0 && len(m.cfg.Observers) == 0
}

// Cluster implements core.Backend: the active configuration as this member
// has applied it.
func (m *Member) Cluster(ctx context.Context) (core.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return core.Cluster{}, err
	}
	return m.cluster(m.Status().LeaderID), nil
}

// cluster converts this member's view of the active configuration,
// marking leader.
func (m *Member) cluster(leader uint64) core.Cluster {
	active, _ := m.zab.Membership()
	return m.clusterOf(active, leader)
}

// clusterOf converts a configuration, marking leader. The starting one
// (version 0) has no Meta and shows as the flags describe it.
func (m *Member) clusterOf(active zab.Membership, leader uint64) core.Cluster {
	if active.Version == 0 {
		c := core.Cluster{Members: m.members(leader), LastID: active.LastID}
		slices.SortFunc(c.Members, func(a, b core.ClusterMember) int { return cmpID(a.ID, b.ID) })
		return c
	}
	c := core.Cluster{Version: active.Version, Time: active.Time, LastID: active.LastID}
	for _, group := range []struct {
		ids      []uint64
		observer bool
	}{{active.Voters, false}, {active.Observers, true}} {
		for _, id := range group.ids {
			cm := core.ClusterMember{ID: id, IsLeader: id == leader, IsObserver: group.observer}
			if a := active.Addrs[id]; a != "" {
				cm.PeerURL = "http://" + a
			}
			if err := decodeMeta(&cm, active.Meta[id]); err != nil {
				m.log.Warn("unreadable member meta", "member", id, "err", err)
			}
			if id == m.cfg.ID {
				// This member knows its own addresses better than
				// whoever added it did.
				if m.cfg.EtcdURL != "" && cm.EtcdURL == "" {
					cm.EtcdURL = m.cfg.EtcdURL
				}
				if m.cfg.ZKAddr != "" && cm.ZKAddr == "" {
					cm.ZKAddr = m.cfg.ZKAddr
				}
			}
			c.Members = append(c.Members, cm)
		}
	}
	slices.SortFunc(c.Members, func(a, b core.ClusterMember) int { return cmpID(a.ID, b.ID) })
	return c
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// peerAddr is the host:port of a peer URL ("http://host:port" or a bare
// host:port), the address zab dials.
func peerAddr(url string) (string, error) {
	a := url
	if i := strings.Index(a, "://"); i >= 0 {
		a = a[i+3:]
	}
	a = strings.TrimSuffix(a, "/")
	if a == "" || strings.ContainsAny(a, "/?#") {
		return "", fmt.Errorf("server: peer URL %q is not scheme://host:port", url)
	}
	return a, nil
}

// membershipChange builds zab's change replacing version with members.
func (m *Member) membershipChange(version uint64, members []core.ClusterMember) (zab.MembershipChange, error) {
	ch := zab.MembershipChange{
		Version: version,
		Addrs:   make(map[uint64]string, len(members)),
		Meta:    make(map[uint64][]byte, len(members)),
		Time:    m.cfg.Clock().UnixNano(),
	}
	for _, cm := range members {
		if cm.ID == 0 {
			return zab.MembershipChange{}, errors.New("server: a member without an ID")
		}
		if _, dup := ch.Addrs[cm.ID]; dup {
			return zab.MembershipChange{}, fmt.Errorf("server: member %d named twice", cm.ID)
		}
		a, err := peerAddr(cm.PeerURL)
		if err != nil {
			return zab.MembershipChange{}, fmt.Errorf("member %d: %w", cm.ID, err)
		}
		ch.Addrs[cm.ID] = a
		ch.Meta[cm.ID] = encodeMeta(cm)
		if cm.IsObserver {
			ch.Observers = append(ch.Observers, cm.ID)
		} else {
			ch.Voters = append(ch.Voters, cm.ID)
		}
	}
	if len(ch.Voters) == 0 {
		return zab.MembershipChange{}, errors.New("server: a configuration without voters")
	}
	return ch, nil
}

// ChangeCluster implements core.Backend: the leader proposes the change;
// a follower forwards it and answers once it has applied the new
// configuration's entry itself. The answer is the configuration the change
// committed, which zab hands back: a leader's own view takes it up a
// moment later.
func (m *Member) ChangeCluster(ctx context.Context, version uint64, members []core.ClusterMember) (core.Cluster, error) {
	if m.single() {
		return core.Cluster{}, fmt.Errorf("change cluster: %w", core.ErrNotReplicated)
	}
	if m.roles.leading.Load() {
		active, err := m.changeAsLeader(ctx, version, members)
		if err != nil {
			return core.Cluster{}, err
		}
		return m.clusterOf(active, m.Status().LeaderID), nil
	}
	payload := appendMembers(binary.AppendUvarint([]byte{callChangeCluster}, version), members)
	out, err := m.zab.CallLeader(ctx, payload)
	if errors.Is(err, zab.ErrLeaderChanged) || errors.Is(err, zab.ErrNoLeader) {
		// A change that removes this member, or its leader, ends the
		// role the answer would come back to: the configuration this
		// member took up says whether it committed.
		if active, _ := m.zab.Membership(); active.Version > version && sameMembers(active, members) {
			return m.clusterOf(active, m.Status().LeaderID), nil
		}
	}
	if err != nil {
		return core.Cluster{}, clusterErr("membership change through the leader", err)
	}
	index, rest, err := answerIndex(out)
	if err != nil {
		return core.Cluster{}, fmt.Errorf("change cluster: %w", err)
	}
	next, err := decodeCluster(rest)
	if err != nil {
		return core.Cluster{}, fmt.Errorf("change cluster: %w", err)
	}
	err = m.zab.WaitApplied(ctx, index)
	if errors.Is(err, zab.ErrRemoved) {
		// A change that removes this member can commit without this
		// member applying it: the COMMIT may come before its log holds
		// the entry, and a removed member writes nothing more. The
		// configuration it took up says whether that change removed it.
		if active, _ := m.zab.Membership(); active.Version >= next.Version {
			err = nil
		}
	}
	if err != nil {
		return core.Cluster{}, clusterErr(fmt.Sprintf("wait applied %d", index), err)
	}
	if err := m.awaitActive(ctx, next.Version); err != nil {
		return core.Cluster{}, err
	}
	// The leader's answer leaves the entry's time out (the call's wire
	// form predates it); this member has applied that entry itself.
	if active, _ := m.zab.Membership(); active.Version == next.Version {
		next.Time = active.Time
	}
	leader := m.Status().LeaderID
	for i := range next.Members {
		next.Members[i].IsLeader = next.Members[i].ID == leader
	}
	return next, nil
}

// sameMembers reports whether active has exactly members' voters and
// observers.
func sameMembers(active zab.Membership, members []core.ClusterMember) bool {
	var voters, observers []uint64
	for _, cm := range members {
		if cm.IsObserver {
			observers = append(observers, cm.ID)
		} else {
			voters = append(voters, cm.ID)
		}
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return slices.Equal(voters, active.Voters) && slices.Equal(observers, active.Observers)
}

// changeAsLeader proposes the change on this member, the leader, and
// returns the configuration once its entry is applied here.
func (m *Member) changeAsLeader(ctx context.Context, version uint64, members []core.ClusterMember) (zab.Membership, error) {
	ch, err := m.membershipChange(version, members)
	if err != nil {
		return zab.Membership{}, fmt.Errorf("change cluster: %w: %w", &core.Error{Code: core.CodeBadArguments}, err)
	}
	// The leader's view of its peers is refreshed every heartbeat: one
	// just elected may not have it yet, and a peer may have missed a
	// heartbeat or two. One that stays unheard for an election timeout
	// would cost the leader its leadership anyway.
	deadline := time.Now().Add(m.electionTimeout())
	for {
		err := m.connectedQuorum(ch.Voters)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return zab.Membership{}, fmt.Errorf("change cluster: %w", err)
		}
		select {
		case <-ctx.Done():
			return zab.Membership{}, clusterErr("change cluster", ctx.Err())
		case <-time.After(m.heartbeat()):
		}
	}
	active, err := m.zab.ChangeMembership(ctx, ch)
	if err != nil {
		return zab.Membership{}, changeErr(err)
	}
	// zab answers once the entry is applied; a leader's Core takes the
	// configuration up at its next step. Until then this member would
	// still show the old one, and refuse the next change as pending.
	if err := m.awaitActive(ctx, active.Version); err != nil {
		return zab.Membership{}, err
	}
	m.log.Info("membership changed", "version", zab.FormatZxid(active.Version), "voters", active.Voters, "observers", active.Observers)
	return active, nil
}

// connectedQuorum refuses a configuration whose voters this leader is not
// connected to enough of (itself and the members synchronized with it) to
// make a quorum: its entry could not commit, and every write would wait
// for it. It is etcd's strict reconfiguration check, and ZooKeeper's: a
// new voter not yet started counts as down.
func (m *Member) connectedQuorum(voters []uint64) error {
	acked := m.zab.Status().PeerAcked
	n := 0
	for _, id := range voters {
		if _, ok := acked[id]; ok || id == m.cfg.ID {
			n++
		}
	}
	if need := len(voters)/2 + 1; n < need {
		return fmt.Errorf("%w: %d of %d voters connected, %d needed", core.ErrUnhealthy, n, len(voters), need)
	}
	return nil
}

// changeErr turns zab's refusals of a change into core's.
func changeErr(err error) error {
	for _, e := range []struct{ zab, core error }{
		{zab.ErrChangePending, core.ErrChangePending},
		{zab.ErrStaleMembership, core.ErrStaleCluster},
		{zab.ErrNotCaughtUp, core.ErrNotCaughtUp},
		{zab.ErrNotLeader, core.ErrNoLeader},
		{zab.ErrNotReplicated, core.ErrNotReplicated},
	} {
		if errors.Is(err, e.zab) {
			return fmt.Errorf("change cluster: %w: %w", e.core, err)
		}
	}
	return clusterErr("change cluster", err)
}

// MoveLeader implements core.Backend: the leader hands its leadership to
// target; a follower forwards the request to it.
func (m *Member) MoveLeader(ctx context.Context, target uint64) error {
	if m.single() {
		return fmt.Errorf("move leader: %w", core.ErrNotReplicated)
	}
	if m.roles.leading.Load() {
		return m.moveAsLeader(ctx, target)
	}
	old := m.zab.Status().LeaderID
	out, err := m.zab.CallLeader(ctx, binary.AppendUvarint([]byte{callMoveLeader}, target))
	if errors.Is(err, zab.ErrLeaderChanged) || errors.Is(err, zab.ErrNoLeader) {
		// A transfer that succeeds changes the leader before its answer
		// can arrive: the next leader this member follows says.
		return m.awaitLeader(ctx, old, target)
	}
	if err != nil {
		return clusterErr("move leader through the leader", err)
	}
	if _, _, err := answerIndex(out); err != nil {
		return fmt.Errorf("move leader: %w", err)
	}
	return nil
}

// leaderPoll is how often a member that lost its leader during a transfer
// looks whether it follows the next one yet.
const leaderPoll = 10 * time.Millisecond

// awaitLeader waits until this member follows a leader other than old and
// reports whether it is target.
func (m *Member) awaitLeader(ctx context.Context, old, target uint64) error {
	for {
		if l := m.zab.Status().LeaderID; l != 0 && l != old {
			if l != target {
				return fmt.Errorf("move leader to %d: %d leads: %w", target, l, core.ErrTransferTimeout)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return clusterErr(fmt.Sprintf("move leader to %d", target), ctx.Err())
		case <-m.zab.Done():
			return clusterErr(fmt.Sprintf("move leader to %d", target), zab.ErrStopped)
		case <-time.After(leaderPoll):
		}
	}
}

// awaitActive waits until this member's active configuration is version
// or a later one.
func (m *Member) awaitActive(ctx context.Context, version uint64) error {
	for {
		if active, _ := m.zab.Membership(); active.Version >= version {
			return nil
		}
		select {
		case <-ctx.Done():
			return clusterErr("wait for the new configuration", ctx.Err())
		case <-m.zab.Done():
			return clusterErr("wait for the new configuration", zab.ErrStopped)
		case <-time.After(time.Millisecond):
		}
	}
}

// heartbeat is zab's heartbeat interval as this member runs it.
func (m *Member) heartbeat() time.Duration {
	if m.cfg.HeartbeatInterval > 0 {
		return m.cfg.HeartbeatInterval
	}
	return 100 * time.Millisecond
}

// publishSelf gives this member's name and client addresses to a
// configuration that lists it without a name, as etcd's members publish
// theirs when they start: a member added by etcd's MemberAdd (or a
// ZooKeeper reconfig) is named only by its peer address until it runs.
// It looks every publishInterval until ctx ends or the member stops.
func (m *Member) publishSelf(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.zab.Done():
			return
		case <-t.C:
		}
		active, _ := m.zab.Membership()
		if active.Version == 0 || !active.IsMember(m.cfg.ID) {
			continue // the flags name it, or it is not (yet) a member
		}
		me := core.ClusterMember{ID: m.cfg.ID}
		if err := decodeMeta(&me, active.Meta[m.cfg.ID]); err != nil || me.Name != "" {
			continue
		}
		cur := m.clusterOf(active, 0)
		for i := range cur.Members {
			if cm := &cur.Members[i]; cm.ID == m.cfg.ID {
				cm.Name = m.cfg.Name
				if cm.EtcdURL == "" {
					cm.EtcdURL = m.cfg.EtcdURL
				}
				if cm.ZKAddr == "" {
					cm.ZKAddr = m.cfg.ZKAddr
				}
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 4*m.electionTimeout())
		_, err := m.ChangeCluster(cctx, cur.Version, cur.Members)
		cancel()
		if err != nil {
			m.log.Info("publishing this member's name to the configuration", "err", err)
			continue
		}
		m.log.Info("published this member's name to the configuration", "name", m.cfg.Name)
	}
}

// publishInterval is how often a member looks whether the configuration
// lacks its name.
const publishInterval = time.Second

// electionTimeout is zab's election timeout as this member runs it.
func (m *Member) electionTimeout() time.Duration {
	if m.cfg.ElectionTimeout > 0 {
		return m.cfg.ElectionTimeout
	}
	return time.Second
}

// moveAsLeader transfers this member's leadership to target.
func (m *Member) moveAsLeader(ctx context.Context, target uint64) error {
	active, _ := m.zab.Membership()
	if !active.IsVoter(target) {
		return fmt.Errorf("move leader to %d: %w", target, core.ErrNotVoter)
	}
	if target == m.cfg.ID {
		return nil
	}
	if err := m.zab.TransferLeadership(ctx, target); err != nil {
		what := fmt.Sprintf("move leader to %d", target)
		switch {
		case errors.Is(err, zab.ErrNotLeader):
			return fmt.Errorf("%s: %w: %w", what, core.ErrNoLeader, err)
		case errors.Is(err, zab.ErrBadTransferee):
			return fmt.Errorf("%s: %w: %w", what, core.ErrNotVoter, err)
		case errors.Is(err, zab.ErrTransferTimeout):
			return fmt.Errorf("%s: %w: %w", what, core.ErrTransferTimeout, err)
		case errors.Is(err, zab.ErrTransferPending):
			return fmt.Errorf("%s: %w: %w", what, core.ErrChangePending, err)
		}
		return clusterErr(what, err)
	}
	m.log.Info("leadership moved", "to", target)
	return nil
}

// Leader calls for membership: the answer is a status byte (answerOK, or
// one of the refusals below) and, after answerOK, a uvarint (the index of
// the applied configuration entry, 0 for a leader transfer). zab passes a
// handler's error back as text only, so the refusals a face maps to its
// protocol's errors travel as codes.
const (
	callChangeCluster byte = 3
	callMoveLeader    byte = 4
)

// refusals are the errors a membership leader call answers by code; the
// code is the index + 2 (after answerOK and answerNotFound).
var refusals = []error{
	core.ErrChangePending, core.ErrStaleCluster, core.ErrNotCaughtUp,
	core.ErrUnhealthy, core.ErrNoLeader, core.ErrNotVoter, core.ErrLeaderChanged,
	core.ErrTransferTimeout, core.ErrNotReplicated,
}

// serveMembershipCall answers a follower's ChangeCluster or MoveLeader on
// the leader.
func (m *Member) serveMembershipCall(ctx context.Context, payload []byte) ([]byte, error) {
	var index uint64
	var tail []byte // after the index: the configuration a change committed
	var err error
	switch payload[0] {
	case callChangeCluster:
		version, n := binary.Uvarint(payload[1:])
		if n <= 0 {
			return nil, errors.New("server: malformed membership call")
		}
		members, derr := decodeMembers(payload[1+n:])
		if derr != nil {
			return nil, derr
		}
		if !m.roles.leading.Load() {
			err = core.ErrNoLeader
			break
		}
		var active zab.Membership
		active, err = m.changeAsLeader(ctx, version, members)
		index = active.Index
		c := m.clusterOf(active, m.cfg.ID)
		tail = appendMembers(binary.AppendUvarint(binary.AppendUvarint(nil, c.Version), c.LastID), c.Members)
	case callMoveLeader:
		target, n := binary.Uvarint(payload[1:])
		if n <= 0 {
			return nil, errors.New("server: malformed membership call")
		}
		if !m.roles.leading.Load() {
			err = core.ErrNoLeader
			break
		}
		err = m.moveAsLeader(ctx, target)
	}
	if err != nil {
		for i, r := range refusals {
			if errors.Is(err, r) {
				return []byte{byte(i + 2)}, nil
			}
		}
		return nil, err
	}
	return append(binary.AppendUvarint([]byte{answerOK}, index), tail...), nil
}

// answerIndex reads a membership call's answer: the index and what
// follows it, or the refusal.
func answerIndex(out []byte) (uint64, []byte, error) {
	if len(out) == 0 {
		return 0, nil, errors.New("server: empty answer from the leader")
	}
	if out[0] != answerOK {
		if i := int(out[0]) - 2; i >= 0 && i < len(refusals) {
			return 0, nil, fmt.Errorf("the leader refused: %w", refusals[i])
		}
		return 0, nil, fmt.Errorf("server: unknown answer %d from the leader", out[0])
	}
	index, n := binary.Uvarint(out[1:])
	if n <= 0 {
		return 0, nil, errors.New("server: malformed answer from the leader")
	}
	return index, out[1+n:], nil
}

// decodeCluster reads a configuration from a leader's answer: its
// version, its LastID, then its members as appendMembers wrote them.
func decodeCluster(b []byte) (core.Cluster, error) {
	var c core.Cluster
	var n int
	if c.Version, n = binary.Uvarint(b); n <= 0 {
		return core.Cluster{}, errors.New("server: malformed configuration from the leader")
	}
	b = b[n:]
	if c.LastID, n = binary.Uvarint(b); n <= 0 {
		return core.Cluster{}, errors.New("server: malformed configuration from the leader")
	}
	members, err := decodeMembers(b[n:])
	if err != nil {
		return core.Cluster{}, err
	}
	c.Members = members
	return c, nil
}

// appendMembers encodes members for a leader call: a count, then per
// member its ID, an observer flag, its peer URL and its Meta.
func appendMembers(b []byte, members []core.ClusterMember) []byte {
	b = binary.AppendUvarint(b, uint64(len(members)))
	for _, cm := range members {
		b = binary.AppendUvarint(b, cm.ID)
		flag := byte(0)
		if cm.IsObserver {
			flag = 1
		}
		b = append(b, flag)
		for _, s := range [][]byte{[]byte(cm.PeerURL), encodeMeta(cm)} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

// decodeMembers reads what appendMembers wrote.
func decodeMembers(b []byte) ([]core.ClusterMember, error) {
	bad := errors.New("server: malformed members in a leader call")
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(len(b)) {
		return nil, bad
	}
	b = b[k:]
	out := make([]core.ClusterMember, 0, count)
	for range count {
		id, k := binary.Uvarint(b)
		if k <= 0 || len(b) < k+1 {
			return nil, bad
		}
		cm := core.ClusterMember{ID: id, IsObserver: b[k] == 1}
		b = b[k+1:]
		var fields [2][]byte
		for i := range fields {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return nil, bad
			}
			fields[i] = b[k : k+int(n)]
			b = b[k+int(n):]
		}
		cm.PeerURL = string(fields[0])
		if err := decodeMeta(&cm, fields[1]); err != nil {
			return nil, fmt.Errorf("%w: %w", bad, err)
		}
		out = append(out, cm)
	}
	if len(b) != 0 {
		return nil, bad
	}
	return out, nil
}
