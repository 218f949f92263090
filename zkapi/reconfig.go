package zkapi

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// ZooKeeper's dynamic configuration, as Janus shows and changes it.
//
// /zookeeper/config holds one line per member,
//
//	server.N=host:quorumPort:electionPort:participant|observer;clientHost:clientPort
//
// then version=<the configuration's zxid in hex>. Janus has one peer port:
// the quorum address is the member's peer address, and the election port is
// the one a reconfig named (ClusterMember.ZKElectionAddr), else 0: a
// member Janus started from flags has none, and ZooKeeper's QuorumServer
// (which Curator parses these lines with) refuses an election port equal
// to the quorum port. Curator's EnsembleTracker rewrites its connection
// string from the client addresses, so every member's is shown.

// configPath is the node ZooKeeper keeps its dynamic configuration in.
const configPath = "/zookeeper/config"

// configData renders cl as ZooKeeper's QuorumMaj.toString does.
func configData(cl core.Cluster) []byte {
	var b bytes.Buffer
	for _, m := range cl.Members {
		fmt.Fprintf(&b, "server.%d=%s\n", m.ID, serverSpec(m))
	}
	fmt.Fprintf(&b, "version=%x", cl.Version)
	return b.Bytes()
}

// serverSpec is a member's QuorumServer.toString.
func serverSpec(m core.ClusterMember) string {
	host, quorumPort, electionPort := zkPorts(m)
	role := "participant"
	if m.IsObserver {
		role = "observer"
	}
	s := fmt.Sprintf("%s:%s:%s:%s", delimitedHost(host), quorumPort, electionPort, role)
	if m.ZKAddr != "" {
		chost, cport := splitHostPort(m.ZKAddr)
		s += fmt.Sprintf(";%s:%s", delimitedHost(chost), cport)
	}
	return s
}

// zkPorts returns a member's peer host and the ports ZooKeeper would call
// its quorum and election ports (see above).
func zkPorts(m core.ClusterMember) (host, quorumPort, electionPort string) {
	host, quorumPort = splitHostPort(peerHostPort(m))
	electionPort = "0"
	if m.ZKElectionAddr != "" {
		_, electionPort = splitHostPort(m.ZKElectionAddr)
	}
	return host, quorumPort, electionPort
}

// peerHostPort is a member's peer address without the URL scheme.
func peerHostPort(m core.ClusterMember) string {
	a := m.PeerURL
	if i := strings.Index(a, "://"); i >= 0 {
		a = a[i+3:]
	}
	return a
}

// splitHostPort splits host:port, taking a string without a port as a
// host.
func splitHostPort(addr string) (host, port string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, ""
	}
	return h, p
}

// delimitedHost brackets an IPv6 address, as ZooKeeper's
// delimitedHostString does.
func delimitedHost(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}

// configStat is the Stat ZooKeeper shows for /zookeeper/config: written by
// each reconfig's setData with version -1, never created (czxid 0), last
// modified when the configuration's entry was accepted.
func configStat(cl core.Cluster, data []byte) jute.Stat {
	return jute.Stat{Mzxid: int64(cl.Version), Mtime: cl.Time, Version: -1, Aversion: -1, DataLength: int32(len(data))}
}

// errReconfigArgs is a reconfig request ZooKeeper answers with
// BadArguments; errReconfigNumber one it answers with MarshallingError (a
// server ID that is not a number escapes its parser as
// NumberFormatException).
var (
	errReconfigArgs   = errors.New("bad reconfig arguments")
	errReconfigNumber = errors.New("server id is not a number")
)

// nextConfig computes the members a reconfig request asks for, from the
// active configuration cur, as ZooKeeper 3.8's PrepRequestProcessor does:
// newMembers, when given, is the whole new configuration; otherwise
// leavingServers (IDs) are dropped, then joiningServers (server.N=spec)
// added or replaced. A member kept or re-added keeps what only Janus knows
// of it (its name, its etcd address).
func nextConfig(cur core.Cluster, r *jute.ReconfigRequest) ([]core.ClusterMember, error) {
	var next []core.ClusterMember
	if r.NewMembers != "" {
		// Commas or newlines separate the lines, as ZooKeeper accepts.
		for _, line := range strings.Split(strings.ReplaceAll(r.NewMembers, ",", "\n"), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
			key, value, ok := strings.Cut(line, "=")
			key = strings.TrimSpace(key)
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: %q is not key=value", errReconfigArgs, line)
			case strings.HasPrefix(key, "group") || strings.HasPrefix(key, "weight"):
				// A hierarchical quorum system, which Janus has not.
				return nil, fmt.Errorf("%w: %q: hierarchical quorums are not supported", errReconfigArgs, line)
			case !strings.HasPrefix(key, "server."):
				// QuorumMaj reads server.N and version and ignores the
				// rest; the new version is the change's own zxid.
				continue
			}
			m, err := joiner(cur, key, strings.TrimSpace(value), false)
			if err != nil {
				return nil, err
			}
			next = put(next, m)
		}
	} else {
		next = append(next, cur.Members...)
		for _, s := range splitTrim(r.LeavingServers, ",") {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %q", errReconfigNumber, s)
			}
			next = drop(next, uint64(id))
		}
		for _, s := range splitTrim(r.JoiningServers, ",") {
			parts := splitTrim(s, "=")
			if len(parts) != 2 {
				return nil, fmt.Errorf("%w: wrong format of server string %q", errReconfigArgs, s)
			}
			m, err := joiner(cur, parts[0], parts[1], true)
			if err != nil {
				return nil, err
			}
			for _, o := range next {
				if o.ID != m.ID && sharesAddr(o, m) {
					return nil, fmt.Errorf("%w: server.%d repeats an address of server.%d", errReconfigArgs, m.ID, o.ID)
				}
			}
			next = put(drop(next, m.ID), m)
		}
	}
	voters := 0
	for _, m := range next {
		if !m.IsObserver {
			voters++
		}
	}
	// ZooKeeper's standaloneEnabled (true by default) asks for two.
	if voters < 2 {
		return nil, fmt.Errorf("%w: the new configuration must include at least 2 followers", errReconfigArgs)
	}
	return next, nil
}

// joiner parses one server.N=spec of a reconfig into a member, starting
// from what cur knows of N. An incremental reconfig's joiner must name a
// client port; a -members line may leave it out (N keeps the one it has).
func joiner(cur core.Cluster, key, spec string, needClient bool) (core.ClusterMember, error) {
	id, err := strconv.ParseInt(key[strings.LastIndexByte(key, '.')+1:], 10, 64)
	if err != nil {
		return core.ClusterMember{}, fmt.Errorf("%w: %q", errReconfigNumber, key)
	}
	if id <= 0 {
		return core.ClusterMember{}, fmt.Errorf("%w: server id %d", errReconfigArgs, id)
	}
	m, _ := cur.Member(uint64(id))
	m.ID, m.IsLeader = uint64(id), false
	if err := parseServerSpec(spec, &m, needClient); err != nil {
		return core.ClusterMember{}, err
	}
	return m, nil
}

// parseServerSpec reads host:quorumPort:electionPort[:role][;[clientHost:]clientPort]
// as ZooKeeper's QuorumServer does, into m's addresses and role. Without
// a client part m keeps its client address, unless needClient refuses it.
func parseServerSpec(spec string, m *core.ClusterMember, needClient bool) error {
	server, client, ok := strings.Cut(spec, ";")
	if (!ok && needClient) || strings.Contains(client, ";") {
		return fmt.Errorf("%w: %q: each server needs 3 ports", errReconfigArgs, spec)
	}
	parts, err := splitServerParts(server)
	if err != nil {
		return err
	}
	if len(parts) != 3 && len(parts) != 4 {
		return fmt.Errorf("%w: %q is not host:port:port[:type]", errReconfigArgs, server)
	}
	host := parts[0]
	qport, err1 := parsePort(parts[1])
	eport, err2 := parsePort(parts[2])
	if host == "" || err1 != nil || err2 != nil {
		return fmt.Errorf("%w: %q: bad host or port", errReconfigArgs, server)
	}
	if qport == eport {
		// QuorumServer's own check; a line failing it breaks every
		// client that parses the configuration (Curator).
		return fmt.Errorf("%w: %q: quorum and election ports must differ", errReconfigArgs, server)
	}
	m.IsObserver = false
	if len(parts) == 4 {
		switch strings.ToLower(parts[3]) {
		case "observer":
			m.IsObserver = true
		case "participant":
		default:
			return fmt.Errorf("%w: unrecognised peer type %q", errReconfigArgs, parts[3])
		}
	}
	m.PeerURL = "http://" + net.JoinHostPort(host, strconv.Itoa(qport))
	m.ZKElectionAddr = net.JoinHostPort(host, strconv.Itoa(eport))
	if !ok {
		return nil
	}
	chost, cportStr := "0.0.0.0", client
	if i := strings.LastIndexByte(client, ':'); i >= 0 {
		chost, cportStr = strings.Trim(client[:i], "[]"), client[i+1:]
	}
	cport, err := parsePort(cportStr)
	if err != nil || chost == "" {
		return fmt.Errorf("%w: %q: bad client address", errReconfigArgs, client)
	}
	m.ZKAddr = net.JoinHostPort(chost, strconv.Itoa(cport))
	return nil
}

// splitServerParts splits a server address on colons, keeping a
// bracketed IPv6 host whole.
func splitServerParts(s string) ([]string, error) {
	if !strings.HasPrefix(s, "[") {
		return strings.Split(s, ":"), nil
	}
	end := strings.IndexByte(s, ']')
	if end < 0 || (end+1 < len(s) && s[end+1] != ':') {
		return nil, fmt.Errorf("%w: %q: bad IPv6 address", errReconfigArgs, s)
	}
	rest := []string{}
	if end+1 < len(s) {
		rest = strings.Split(s[end+2:], ":")
	}
	return append([]string{s[1:end]}, rest...), nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return p, nil
}

// sharesAddr reports whether joiner names a quorum, election or client
// address of other, which ZooKeeper's checkAddressDuplicate refuses.
func sharesAddr(other, joiner core.ClusterMember) bool {
	addrs := func(m core.ClusterMember) []string {
		return []string{peerHostPort(m), m.ZKElectionAddr, m.ZKAddr}
	}
	theirs := addrs(other)
	for _, a := range addrs(joiner) {
		if _, port := splitHostPort(a); a != "" && port != "0" && slices.Contains(theirs, a) {
			return true
		}
	}
	return false
}

// splitTrim splits s on sep, trims each piece and drops empty ones, as
// ZooKeeper's StringUtils.split does.
func splitTrim(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// put adds m to ms, keeping them sorted by ID.
func put(ms []core.ClusterMember, m core.ClusterMember) []core.ClusterMember {
	ms = drop(ms, m.ID)
	i := 0
	for i < len(ms) && ms[i].ID < m.ID {
		i++
	}
	return append(ms[:i], append([]core.ClusterMember{m}, ms[i:]...)...)
}

// drop returns ms without the member id (a copy when it changes).
func drop(ms []core.ClusterMember, id uint64) []core.ClusterMember {
	out := make([]core.ClusterMember, 0, len(ms))
	for _, m := range ms {
		if m.ID != id {
			out = append(out, m)
		}
	}
	return out
}

// reconfig answers OpReconfig as ZooKeeper 3.8's leader does: refused with
// ReconfigDisabled unless the switch is on; then the version check, the
// request's own checks, WRITE on /zookeeper/config (super, or an ACL a
// super user set there: the node is world-readable only), and the change
// itself, which the leader carries out. The answer is the new
// configuration, as getData of /zookeeper/config would show it.
func (c *conn) reconfig(r *jute.ReconfigRequest, ids []core.ID) reply {
	if !c.srv.cfg.ReconfigEnabled {
		return errReply(c.srv.watches.Dispatched(), jute.CodeReconfigDisabled)
	}
	c.flushOut() // the change waits for the leader
	cur, err := c.srv.backend.Cluster(c.ctx)
	if err != nil {
		return reply{fail: fmt.Errorf("%w: reconfig: %w", errBackend, err)}
	}
	if len(cur.Members) == 1 {
		// A member on its own is ZooKeeper's standalone server, which
		// has no quorum to change: Unimplemented, before any check.
		return errReply(c.srv.watches.Dispatched(), jute.CodeUnimplemented)
	}
	if r.CurConfigID != -1 && uint64(r.CurConfigID) != cur.Version {
		c.log.Info("reconfig refused: stale configuration version", "from", fmt.Sprintf("%x", r.CurConfigID), "active", fmt.Sprintf("%x", cur.Version))
		return errReply(c.srv.watches.Dispatched(), jute.CodeBadVersion)
	}
	next, err := nextConfig(cur, r)
	if err != nil {
		c.log.Info("reconfig refused", "err", err)
		if errors.Is(err, errReconfigNumber) {
			return errReply(c.srv.watches.Dispatched(), jute.CodeMarshallingError)
		}
		return errReply(c.srv.watches.Dispatched(), jute.CodeBadArguments)
	}
	if refused := c.view(false, func(v core.ReadView) reply {
		n, _, err := lookup(v, configPath)
		if err != nil {
			return reply{fail: err}
		}
		if !core.ZKAllowed(c.srv.backend.Auth(), n.ACL, []byte(configPath), core.PermWrite, ids) {
			return reply{code: jute.CodeNoAuth}
		}
		return reply{}
	}); refused.fail != nil || refused.code != jute.CodeOk {
		return refused
	}
	cl, err := c.srv.backend.ChangeCluster(c.ctx, cur.Version, next)
	if err != nil {
		code, ok := reconfigCode(err)
		if !ok {
			return reply{fail: fmt.Errorf("%w: reconfig: %w", errBackend, err)}
		}
		c.log.Info("reconfig refused", "err", err, "code", code)
		return errReply(c.srv.watches.Dispatched(), code)
	}
	c.log.Info("reconfig committed", "version", fmt.Sprintf("%x", cl.Version), "members", len(cl.Members))
	// Fire /zookeeper/config's watches before answering, as ZooKeeper's
	// apply of the reconfig does.
	w := c.srv.watches
	w.mu.Lock()
	c.srv.noteConfigLocked(cl)
	w.mu.Unlock()
	data := configData(cl)
	return reply{zxid: w.Dispatched(), body: &jute.GetDataResponse{Data: data, Stat: configStat(cl, data)}}
}

// reconfigCode maps a refused membership change to ZooKeeper's code.
func reconfigCode(err error) (jute.Code, bool) {
	switch {
	case errors.Is(err, core.ErrChangePending):
		return jute.CodeReconfigInProgress, true
	case errors.Is(err, core.ErrStaleCluster):
		return jute.CodeBadVersion, true
	case errors.Is(err, core.ErrUnhealthy), errors.Is(err, core.ErrNotCaughtUp):
		// ZooKeeper's isQuorumSynced: a quorum of the new configuration
		// must be connected and synced with the leader.
		return jute.CodeNewConfigNoQuorum, true
	case errors.Is(err, core.ErrNotReplicated):
		// A standalone ZooKeeper answers reconfig with Unimplemented.
		return jute.CodeUnimplemented, true
	}
	return 0, false
}

// configACL is /zookeeper/config's ACL, world-readable only, as
// ZooKeeper creates it.
var configACL = []core.ACL{{Perms: core.PermRead, ID: core.ID{Scheme: "world", ID: "anyone"}}}

// noteConfigLocked records cl as the configuration the face has seen and,
// if it is not the one seen before, fires /zookeeper/config's data watches
// with NodeDataChanged. Every read of the configuration that arms a watch
// calls it first, under the same lock, so a watch fires for the changes
// after the configuration its reader saw and for no earlier one. w.mu is
// held.
func (s *Server) noteConfigLocked(cl core.Cluster) {
	if cl.Version == s.configSeen {
		return
	}
	s.configSeen = cl.Version
	w := s.watches
	conns := w.data.trigger(configPath, jute.EventNodeDataChanged, math.MaxInt64, nil, map[*conn]bool{})
	w.notify(conns, jute.EventNodeDataChanged, configPath, configACL)
}

// configPollInterval is how often the face looks for a configuration that
// changed other than through its own reconfig (the etcd face's member
// commands, another member's ZooKeeper clients): configuration entries
// change no node, so the event stream does not report them.
const configPollInterval = 100 * time.Millisecond

// followConfig fires /zookeeper/config's watches as configurations commit,
// until the server closes.
func (s *Server) followConfig() {
	t := time.NewTicker(configPollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		cl, err := s.backend.Cluster(s.ctx)
		if err != nil {
			continue // a stopped member; its reads fail too
		}
		s.watches.mu.Lock()
		s.noteConfigLocked(cl)
		s.watches.mu.Unlock()
	}
}

// configNode overlays /zookeeper/config's data and stat, as ZooKeeper
// shows them, on what the tree holds there (its ACL); watched says the
// caller holds w.mu to arm a watch, so the configuration it shows is
// noted first (see noteConfigLocked).
func (c *conn) configNode(n *core.Node, watched bool) (*core.Node, jute.Stat, error) {
	cl, err := c.srv.backend.Cluster(c.ctx)
	if err != nil {
		return nil, jute.Stat{}, fmt.Errorf("%w: configuration: %w", errBackend, err)
	}
	if watched {
		c.srv.noteConfigLocked(cl)
	}
	o := *n
	o.Value = configData(cl)
	st := configStat(cl, o.Value)
	if !n.Implicit {
		// A super user set an ACL there: ZooKeeper counts that change.
		st.Aversion = toStat(n, nil).Aversion
	}
	return &o, st, nil
}
