package zkapi

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// fourLetterWord answers a four-letter word if the connection starts with
// one, as ZooKeeper does before the handshake, and reports whether it did.
func (c *conn) fourLetterWord() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.MaxSessionTimeout))
	head, err := c.br.Peek(4)
	if err != nil || !slices.Contains(fourLetterWords, string(head)) {
		return false
	}
	cmd := string(head)
	c.countReceived()
	var out string
	if !c.srv.allowed(cmd) {
		out = cmd + " is not executed because it is not in the whitelist.\n"
	} else {
		out = c.srv.fourLetterText(cmd)
	}
	c.push([]byte(out))
	return true
}

// fourLetterText renders a four-letter word's answer as ZooKeeper formats it.
func (s *Server) fourLetterText(cmd string) string {
	var b strings.Builder
	kv := func(pairs [][2]string, sep string) {
		for _, p := range pairs {
			fmt.Fprintf(&b, "%s%s%s\n", p[0], sep, p[1])
		}
	}
	switch cmd {
	case "ruok":
		return "imok"
	case "isro":
		return "rw"
	case "conf":
		kv(s.conf(), "=")
	case "envi":
		b.WriteString("Environment:\n")
		kv(s.envi(), "=")
	case "srvr", "stat":
		nodes, _, _, _, err := s.treeCounts()
		if err != nil {
			return "This ZooKeeper instance is not currently serving requests\n"
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
		fmt.Fprintf(&b, "Zxid: 0x%x\nMode: %s\nNode count: %d\n", s.backend.Status().Rev, s.mode(), nodes)
	case "mntr":
		pairs, err := s.mntr()
		if err != nil {
			return "This ZooKeeper instance is not currently serving requests\n"
		}
		kv(pairs, "\t")
	case "cons":
		for _, ci := range s.connInfos() {
			b.WriteString(ci.line(false))
			b.WriteString("\n")
		}
		b.WriteString("\n")
	case "wchs":
		conns, paths, watches := s.watches.counts()
		fmt.Fprintf(&b, "%d connections watching %d paths\nTotal watches:%d\n", conns, paths, watches)
	case "wchp":
		byPath := s.watches.watchesByPath()
		for _, p := range sortedKeys(byPath) {
			fmt.Fprintf(&b, "%s\n", p)
			for _, id := range byPath[p] {
				fmt.Fprintf(&b, "\t0x%x\n", id)
			}
		}
	case "dump":
		_, _, owners, _, err := s.treeCounts()
		if err != nil {
			return "This ZooKeeper instance is not currently serving requests\n"
		}
		b.WriteString("SessionTracker dump:\n")
		fmt.Fprintf(&b, "Global Sessions(%d):\n", len(s.connInfos()))
		for _, ci := range s.connInfos() {
			if ci.Session != "" {
				fmt.Fprintf(&b, "%s\t%dms\n", ci.Session, ci.Timeout)
			}
		}
		fmt.Fprintf(&b, "ephemeral nodes dump:\nSessions with Ephemerals (%d):\n", len(owners))
		for _, id := range sortedKeys(owners) {
			fmt.Fprintf(&b, "0x%x:\n", id)
			for _, p := range owners[id] {
				fmt.Fprintf(&b, "\t%s\n", p)
			}
		}
	default:
		// Recognized but not offered (crst, srst, stmk, gtmk, hash, dirs,
		// wchc): say so rather than hang up silently.
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
