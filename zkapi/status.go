package zkapi

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/januskv/janus/core"
)

// version is what srvr, stat, mntr and the admin commands report: the
// ZooKeeper version whose behaviour Janus matches.
const version = "3.8.0-janus"

// fourLetterWords are the commands ZooKeeper recognizes in the first four
// bytes of a connection.
var fourLetterWords = []string{"conf", "cons", "crst", "dump", "envi", "gtmk", "ruok", "stmk", "srst", "srvr", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash", "dirs"}

// allowed reports whether a four-letter word is whitelisted.
func (s *Server) allowed(cmd string) bool {
	wl := s.cfg.FourLetterWhitelist
	if wl == nil {
		return true
	}
	for _, w := range wl {
		if w == "*" || strings.TrimSpace(w) == cmd {
			return true
		}
	}
	return false
}

// treeCounts returns the number of znodes ZooKeeper would report (the root
// and every tree path) and how many of them are ephemeral, with their
// owners, and the approximate data size.
func (s *Server) treeCounts() (nodes, ephemerals int, owners map[int64][]string, dataSize int64, err error) {
	v, err := s.backend.Read(s.ctx, 0)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	defer v.Close()
	owners = map[int64][]string{}
	nodes = 1 // the root
	err = v.Range([]byte("/"), []byte("0"), func(n *core.Node) bool {
		if !core.IsTreePath(n.Key) || string(n.Key) == "/" {
			return true
		}
		nodes++
		dataSize += int64(len(n.Key) + len(n.Value))
		if n.Lease != 0 && n.Mode == core.ModePersistent {
			ephemerals++
			owners[n.Lease] = append(owners[n.Lease], string(n.Key))
		}
		return true
	})
	return nodes, ephemerals, owners, dataSize, err
}

func (s *Server) mode() string {
	st := s.backend.Status()
	switch {
	case len(st.Members) <= 1:
		return "standalone"
	case st.LeaderID == st.MemberID:
		return "leader"
	}
	return "follower"
}

type connInfo struct {
	Remote   string `json:"remote_socket_address"`
	Session  string `json:"session_id"`
	Received int64  `json:"packets_received"`
	Sent     int64  `json:"packets_sent"`
	Timeout  int64  `json:"session_timeout"`
	Started  string `json:"established"`
}

func (s *Server) connInfos() []connInfo {
	var out []connInfo
	for _, c := range s.connections() {
		ci := connInfo{Remote: c.nc.RemoteAddr().String(), Received: c.received.Load(), Sent: c.sent.Load(),
			Started: c.started.UTC().Format(time.RFC3339)}
		if ss := c.session.Load(); ss != nil {
			ci.Session = fmt.Sprintf("0x%x", ss.id)
			ci.Timeout = ss.timeout.Milliseconds()
		}
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b connInfo) int { return strings.Compare(a.Remote, b.Remote) })
	return out
}

// conf is the configuration as conf and /commands/configuration show it.
func (s *Server) conf() [][2]string {
	return [][2]string{
		{"clientPort", "-1"},
		{"secureClientPort", "-1"},
		{"tickTime", fmt.Sprint(s.cfg.TickTime.Milliseconds())},
		{"maxClientCnxns", fmt.Sprint(s.cfg.MaxClientConns)},
		{"minSessionTimeout", fmt.Sprint(s.cfg.MinSessionTimeout.Milliseconds())},
		{"maxSessionTimeout", fmt.Sprint(s.cfg.MaxSessionTimeout.Milliseconds())},
		{"clientPortListenBacklog", "-1"},
		{"serverId", fmt.Sprint(s.backend.Status().MemberID)},
		{"jute.maxbuffer", fmt.Sprint(s.cfg.MaxBuffer)},
		{"extendedTypesEnabled", fmt.Sprint(!s.cfg.DisableExtendedTypes)},
		{"reaperIntervalMs", fmt.Sprint(s.cfg.ReaperInterval.Milliseconds())},
	}
}

func (s *Server) envi() [][2]string {
	host, _ := os.Hostname()
	return [][2]string{
		{"zookeeper.version", version},
		{"host.name", host},
		{"go.version", runtime.Version()},
		{"os.name", runtime.GOOS},
		{"os.arch", runtime.GOARCH},
	}
}

// mntr returns ZooKeeper's monitoring keys.
func (s *Server) mntr() ([][2]string, error) {
	nodes, ephemerals, _, size, err := s.treeCounts()
	if err != nil {
		return nil, err
	}
	_, paths, watches := s.watches.counts()
	st := s.backend.Status()
	return [][2]string{
		{"zk_version", version},
		{"zk_server_state", s.mode()},
		{"zk_avg_latency", "0"},
		{"zk_max_latency", "0"},
		{"zk_min_latency", "0"},
		{"zk_packets_received", fmt.Sprint(s.packets(true))},
		{"zk_packets_sent", fmt.Sprint(s.packets(false))},
		{"zk_num_alive_connections", fmt.Sprint(len(s.connections()))},
		{"zk_outstanding_requests", "0"},
		{"zk_znode_count", fmt.Sprint(nodes)},
		{"zk_watch_count", fmt.Sprint(watches)},
		{"zk_watched_paths", fmt.Sprint(paths)},
		{"zk_ephemerals_count", fmt.Sprint(ephemerals)},
		{"zk_approximate_data_size", fmt.Sprint(size)},
		{"zk_last_zxid", fmt.Sprintf("0x%x", st.Rev)},
		{"zk_uptime", fmt.Sprint(time.Since(s.started).Milliseconds())},
	}, nil
}

func (s *Server) packets(received bool) int64 {
	var n int64
	for _, c := range s.connections() {
		if received {
			n += c.received.Load()
		} else {
			n += c.sent.Load()
		}
	}
	return n
}
