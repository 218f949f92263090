package zkapi

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/januskv/janus/core"
)

// fourLetterWord answers a four-letter word if the connection starts with
// one, as ZooKeeper does before the handshake, and reports whether it did.
func (c *conn) fourLetterWord() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.MaxSessionTimeout))
	head, err := c.br.Peek(4)
	if err != nil || !slices.Contains(fourLetterWords, string(head)) {
		// A session waits for the server to follow the event stream
		// (see New); a four-letter word never does.
		select {
		case <-c.srv.ready:
		case <-c.srv.ctx.Done():
		}
		return false
	}
	c.srv.awaitReady()
	cmd := string(head)
	c.countReceived(time.Now())
	var out string
	switch {
	case !c.srv.allowed(cmd):
		out = cmd + " is not executed because it is not in the whitelist.\n"
	case restrictedWords[cmd] && c.srv.restricted():
		out = wordRefusal(cmd)
	default:
		out = c.srv.fourLetterText(cmd)
	}
	if out != "" {
		c.push([]byte(out))
	}
	return true
}

// awaitReady returns once the server follows the event stream (its
// system nodes exist then, as a ZooKeeper's always do), or as soon as the
// member cannot serve: without a leader the stream may not start for a
// long time, and a four-letter word should get its out-of-service answer
// at once, as ZooKeeper's does out of quorum.
func (s *Server) awaitReady() {
	select {
	case <-s.ready:
		return
	default:
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for s.backend.Status().ServesSessions() {
		select {
		case <-s.ready:
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// notServing is ZooKeeper's answer to most four-letter words while its
// server is not running: out of quorum, say, or failed.
const notServing = "This ZooKeeper instance is not currently serving requests\n"

// needServing are the words ZooKeeper 3.8 answers with notServing while
// its server is not running (their commands check isZKServerRunning).
var needServing = []string{"conf", "cons", "crst", "dirs", "dump", "hash", "mntr", "srst", "srvr", "stat", "wchc", "wchp", "wchs"}

// unservedText answers cmd for a member that serves no sessions
// (st.ServesSessions is false), as ZooKeeper 3.8 does for a server that is
// not running, and reports whether it did. ruok still says imok without a
// leader, as ZooKeeper's does ("imok" means the process is up and bound
// to the port, not that it is in a quorum), but says nothing once the
// member has stopped or is named by a CORRUPT alarm: ZooKeeper's ruok does
// not respond at all from a server in an error state. A corrupt member
// that is otherwise running still answers mntr, so that monitoring sees
// its alarm.
func unservedText(cmd string, st core.Status) (string, bool) {
	switch {
	case cmd == "ruok":
		if st.Err != nil || st.Corrupt {
			return "", true
		}
		return "", false
	case cmd == "isro":
		return "null", true
	case cmd == "mntr" && st.Err == nil && st.LeaderID != 0:
		return "", false
	case slices.Contains(needServing, cmd):
		return notServing, true
	}
	return "", false
}

// fourLetterText renders a four-letter word's answer as ZooKeeper formats it.
func (s *Server) fourLetterText(cmd string) string {
	var b strings.Builder
	kv := func(pairs [][2]string, sep string) {
		for _, p := range pairs {
			fmt.Fprintf(&b, "%s%s%s\n", p[0], sep, p[1])
		}
	}
	if st := s.backend.Status(); !st.ServesSessions() {
		if out, done := unservedText(cmd, st); done {
			return out
		}
	}
	switch cmd {
	case "ruok":
		return "imok"
	case "isro":
		return "rw"
	case "conf":
		kv(s.conf(), "=")
		if cl, _, ok := s.quorumConf(); ok {
			b.WriteString("membership: \n")
			b.Write(configData(cl))
		}
	case "envi":
		b.WriteString("Environment:\n")
		kv(s.envi(), "=")
	case "srvr", "stat":
		census, err := s.backend.Census()
		if err != nil {
			return notServing
		}
		fmt.Fprintf(&b, "Zookeeper version: %s\n", version)
		if cmd == "stat" {
			b.WriteString("Clients:\n")
			for _, ci := range s.connInfos() {
				b.WriteString(ci.line(true))
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
		l := s.stats.latency.snapshot()
		fmt.Fprintf(&b, "Latency min/avg/max: %d/%s/%d\n", l.min, javaDouble(l.avg), l.max)
		fmt.Fprintf(&b, "Received: %d\nSent: %d\nConnections: %d\nOutstanding: %d\n",
			s.stats.received.Load(), s.stats.sent.Load(), len(s.connections()), s.stats.outstanding.Load())
		fmt.Fprintf(&b, "Zxid: 0x%x\nMode: %s\nNode count: %d\n", s.backend.Status().Rev, s.mode(), census.ZnodeCount())
	case "mntr":
		pairs, err := s.mntr()
		if err != nil {
			return notServing
		}
		kv(pairs, "\t")
	case "cons":
		for _, ci := range s.connInfos() {
			b.WriteString(ci.line(false))
			b.WriteString("\n")
		}
		b.WriteString("\n")
	case "wchs", "wchp", "wchc":
		// As ZooKeeper's WatchCommand: the data watch manager only, then
		// an empty line.
		switch cmd {
		case "wchs":
			conns, paths, watches := s.watches.dataSummary()
			fmt.Fprintf(&b, "%d connections watching %d paths\nTotal watches:%d", conns, paths, watches)
		case "wchp":
			byPath, _ := s.watches.dataWatches()
			for _, p := range sortedKeys(byPath) {
				fmt.Fprintf(&b, "%s\n", p)
				for _, id := range byPath[p] {
					fmt.Fprintf(&b, "\t0x%x\n", id)
				}
			}
		case "wchc":
			_, bySession := s.watches.dataWatches()
			for _, id := range sortedKeys(bySession) {
				fmt.Fprintf(&b, "0x%x\n", id)
				for _, p := range bySession[id] {
					fmt.Fprintf(&b, "\t%s\n", p)
				}
			}
		}
		b.WriteString("\n")
	case "dump":
		if err := s.dump(&b); err != nil {
			return notServing
		}
	case "srst":
		s.stats.reset()
		return "Server stats reset.\n"
	case "crst":
		for _, c := range s.connections() {
			c.resetStats()
		}
		return "Connection stats reset.\n"
	case "dirs":
		data, log := s.dirSizes()
		fmt.Fprintf(&b, "datadir_size: %d\nlogdir_size: %d\n", data, log)
	case "hash":
		return s.digest.history()
	default:
		// Recognized but not offered (stmk, gtmk): say so rather than
		// hang up silently.
		return cmd + " is not supported by this server.\n"
	}
	return b.String()
}

func sortedKeys[K int64 | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// javaDate is how Java's Date.toString prints a time, as dump shows expiry
// times.
const javaDate = "Mon Jan 02 15:04:05 MST 2006"

// dump renders ZooKeeper's dump: the sessions by expiry time (rounded up to
// the tick, as SessionTrackerImpl's ExpiryQueue does), their ephemerals, and
// the connections by expiry time (last activity plus the session timeout,
// in the 10 s steps of NIOServerCnxnFactory's queue).
func (s *Server) dump(b *strings.Builder) error {
	owners, err := s.ephemeralOwners()
	if err != nil {
		return err
	}
	v, err := s.backend.Read(s.ctx, 0)
	if err != nil {
		return err
	}
	var ids []int64
	err = v.Leases(func(l *core.Lease) bool {
		if l.Session != nil {
			ids = append(ids, l.ID)
		}
		return true
	})
	v.Close()
	if err != nil {
		return err
	}
	now := time.Now()
	tick := s.cfg.TickTime.Milliseconds()
	sessions := map[int64][]string{}
	for _, id := range ids {
		left, ok := s.backend.Leases().Remaining(id)
		if !ok {
			continue
		}
		at := roundUp(now.UnixMilli()+left, tick)
		sessions[at] = append(sessions[at], fmt.Sprintf("0x%x", id))
	}
	b.WriteString("SessionTracker dump:\n")
	expirySets(b, "Session", sessions)
	fmt.Fprintf(b, "ephemeral nodes dump:\nSessions with Ephemerals (%d):\n", len(owners))
	for _, id := range sortedKeys(owners) {
		fmt.Fprintf(b, "0x%x:\n", id)
		for _, p := range owners[id] {
			fmt.Fprintf(b, "\t%s\n", p)
		}
	}
	b.WriteString("Connections dump:\n")
	const cnxnStep = 10000 // zookeeper.nio.sessionlessCnxnTimeout's default
	conns := map[int64][]string{}
	for _, c := range s.connections() {
		timeout := int64(cnxnStep)
		var id int64
		if ss := c.session.Load(); ss != nil {
			timeout, id = ss.timeout.Milliseconds(), ss.id
		}
		at := roundUp(c.lastActive.Load()+timeout, cnxnStep)
		conns[at] = append(conns[at], fmt.Sprintf("ip: /%s sessionId: 0x%x", c.nc.RemoteAddr(), id))
	}
	expirySets(b, "Connections", conns)
	return nil
}

func roundUp(ms, step int64) int64 { return (ms/step + 1) * step }

// expirySets prints an ExpiryQueue as ZooKeeper's dump does.
func expirySets(b *strings.Builder, name string, sets map[int64][]string) {
	n := 0
	for _, set := range sets {
		n += len(set)
	}
	fmt.Fprintf(b, "%s Sets (%d)/(%d):\n", name, len(sets), n)
	for _, at := range sortedKeys(sets) {
		set := sets[at]
		slices.Sort(set)
		fmt.Fprintf(b, "%d expire at %s:\n", len(set), time.UnixMilli(at).Format(javaDate))
		for _, e := range set {
			fmt.Fprintf(b, "\t%s\n", e)
		}
	}
}
