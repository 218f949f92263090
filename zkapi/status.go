package zkapi

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
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

// DefaultFourLetterWhitelist is ZooKeeper 3.8's 4lw.commands.whitelist.
var DefaultFourLetterWhitelist = []string{"srvr"}

// allowed reports whether a four-letter word is whitelisted.
func (s *Server) allowed(cmd string) bool {
	wl := s.cfg.FourLetterWhitelist
	if wl == nil {
		wl = DefaultFourLetterWhitelist
	}
	for _, w := range wl {
		if w == "*" || strings.TrimSpace(w) == cmd {
			return true
		}
	}
	return false
}

// ephemeralOwners returns the ephemeral znodes of each session or lease,
// as dump lists them: the one ZooKeeper command that walks the tree. The
// counts the others print come from the member's census.
func (s *Server) ephemeralOwners() (map[int64][]string, error) {
	v, err := s.backend.Read(s.ctx, 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	owners := map[int64][]string{}
	err = v.Range([]byte("/"), []byte("0"), func(n *core.Node) bool {
		if core.IsEphemeralZnode(n) {
			owners[n.Lease] = append(owners[n.Lease], string(n.Key))
		}
		return true
	})
	return owners, err
}

func (s *Server) mode() string {
	st := s.backend.Status()
	switch {
	case len(st.Members) <= 1:
		return "standalone"
	case st.LeaderID == st.MemberID:
		return "leader"
	}
	for _, m := range st.Members {
		if m.ID == st.MemberID && m.IsObserver {
			return "observer"
		}
	}
	return "follower"
}

type connInfo struct {
	Remote      string `json:"remote_socket_address"`
	Session     string `json:"session_id,omitempty"`
	Received    int64  `json:"packets_received"`
	Sent        int64  `json:"packets_sent"`
	Outstanding int64  `json:"outstanding_requests"`
	Timeout     int64  `json:"session_timeout,omitempty"`
	Started     string `json:"established"`
	LastOp      string `json:"last_operation,omitempty"`
	LastCxid    string `json:"last_cxid,omitempty"`
	LastZxid    string `json:"last_zxid,omitempty"`
	LastLatency int64  `json:"last_latency"`
	MinLatency  int64  `json:"min_latency"`
	AvgLatency  int64  `json:"avg_latency"`
	MaxLatency  int64  `json:"max_latency"`

	established int64 // ms since the epoch
	lastResp    int64 // ms since the server started
}

// line renders a connection as ZooKeeper's ServerCnxn.dumpConnectionInfo
// does: the counters, and with brief unset the session's figures.
func (ci connInfo) line(brief bool) string {
	interest := "1"
	if ci.Session == "" {
		interest = "0" // a four-letter-word connection
	}
	var b strings.Builder
	fmt.Fprintf(&b, " /%s[%s](queued=%d,recved=%d,sent=%d", ci.Remote, interest, ci.Outstanding, ci.Received, ci.Sent)
	if !brief && ci.Session != "" {
		fmt.Fprintf(&b, ",sid=%s,lop=%s,est=%d,to=%d", ci.Session, ci.LastOp, ci.established, ci.Timeout)
		if ci.LastCxid != "" {
			fmt.Fprintf(&b, ",lcxid=%s", ci.LastCxid)
		}
		fmt.Fprintf(&b, ",lzxid=%s,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d",
			ci.LastZxid, ci.lastResp, ci.LastLatency, ci.MinLatency, ci.AvgLatency, ci.MaxLatency)
	}
	b.WriteString(")")
	return b.String()
}

func (s *Server) connInfos() []connInfo {
	var out []connInfo
	for _, c := range s.connections() {
		ci := connInfo{Remote: c.nc.RemoteAddr().String(), Received: c.received.Load(), Sent: c.sent.Load(),
			Outstanding: c.outstanding.Load(), Started: c.started.UTC().Format(time.RFC3339), established: c.started.UnixMilli()}
		if ss := c.session.Load(); ss != nil {
			ci.Session = fmt.Sprintf("0x%x", ss.id)
			ci.Timeout = ss.timeout.Milliseconds()
			l := c.stats.latency.snapshot()
			c.stats.mu.Lock()
			lastOp, cxid, zxid := c.stats.lastOp, c.stats.lastCxid, c.stats.lastZxid
			c.stats.mu.Unlock()
			if lastOp == "" {
				lastOp, cxid, zxid = "NA", -1, -1
			}
			ci.LastOp = lastOp
			if cxid >= 0 {
				ci.LastCxid = fmt.Sprintf("0x%x", cxid)
			}
			ci.LastZxid = fmt.Sprintf("0x%x", uint64(zxid))
			ci.LastLatency, ci.MinLatency, ci.AvgLatency, ci.MaxLatency = l.last, l.min, l.avgTruncated, l.max
			if l.count == 0 {
				ci.MinLatency = math.MaxInt64 // ServerCnxn's starting minimum
			} else {
				ci.lastResp = l.lastAnswer.Sub(s.started).Milliseconds()
			}
		}
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b connInfo) int { return strings.Compare(a.Remote, b.Remote) })
	return out
}

// clientPort is the port of the first listener, as conf reports it.
func (s *Server) clientPort() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		if a, ok := l.Addr().(*net.TCPAddr); ok {
			return a.Port
		}
	}
	return -1
}

// conf is the configuration as conf and /commands/configuration show it.
func (s *Server) conf() [][2]string {
	pairs := [][2]string{
		{"clientPort", fmt.Sprint(s.clientPort())},
		{"secureClientPort", "-1"},
	}
	if s.cfg.Dirs != nil {
		data, log := s.cfg.Dirs()
		dataSize, logSize := s.dirSizes()
		pairs = append(pairs,
			[2]string{"dataDir", data},
			[2]string{"dataDirSize", fmt.Sprint(dataSize)},
			[2]string{"dataLogDir", log},
			[2]string{"dataLogSize", fmt.Sprint(logSize)})
	}
	pairs = append(pairs, [][2]string{
		{"tickTime", fmt.Sprint(s.cfg.TickTime.Milliseconds())},
		{"maxClientCnxns", fmt.Sprint(s.cfg.MaxClientConns)},
		{"minSessionTimeout", fmt.Sprint(s.cfg.MinSessionTimeout.Milliseconds())},
		{"maxSessionTimeout", fmt.Sprint(s.cfg.MaxSessionTimeout.Milliseconds())},
		{"clientPortListenBacklog", "-1"},
		{"serverId", fmt.Sprint(s.backend.Status().MemberID)},
		{"jute.maxbuffer", fmt.Sprint(s.cfg.MaxBuffer)},
		{"extendedTypesEnabled", fmt.Sprint(!s.cfg.DisableExtendedTypes)},
		{"reaperIntervalMs", fmt.Sprint(s.cfg.ReaperInterval.Milliseconds())},
	}...)
	if _, self, ok := s.quorumConf(); ok {
		// QuorumZooKeeperServer.dumpConf's lines (initLimit and
		// syncLimit have no counterpart in Janus). Janus's one peer
		// port is ZooKeeper's quorum port.
		_, quorumPort, electionPort := zkPorts(self)
		peerType := "0" // LearnerType.PARTICIPANT's ordinal
		if self.IsObserver {
			peerType = "1"
		}
		pairs = append(pairs, [][2]string{
			{"electionAlg", "3"}, {"electionPort", electionPort}, {"quorumPort", quorumPort}, {"peerType", peerType},
		}...)
	}
	return pairs
}

// quorumConf returns the active configuration and this member's entry in
// it, unless the member runs alone (ZooKeeper's standalone mode shows no
// quorum settings).
func (s *Server) quorumConf() (core.Cluster, core.ClusterMember, bool) {
	cl, err := s.backend.Cluster(s.ctx)
	if err != nil || len(cl.Members) <= 1 {
		return core.Cluster{}, core.ClusterMember{}, false
	}
	self, ok := cl.Member(s.backend.Status().MemberID)
	return cl, self, ok
}

// dirSizes returns the bytes in the state's and the log's directories, as
// ZooKeeper's getDataDirSize and getLogDirSize sum the files of its snapshot
// and log directories; 0 for a directory that cannot be read (a file removed
// while it is counted, say), which ZooKeeper's sizeOfDirectory skips too.
func (s *Server) dirSizes() (data, log int64) {
	if s.cfg.Dirs == nil {
		return 0, 0
	}
	dataDir, logDir := s.cfg.Dirs()
	return dirSize(dataDir), dirSize(logDir)
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
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

// mntr returns ZooKeeper's monitoring keys that Janus can answer, in the
// order ZooKeeper 3.8 prints them, then Janus's own.
func (s *Server) mntr() ([][2]string, error) {
	// A member that refuses to serve because its state is corrupt still
	// answers, without the counts it would read from that state, so that
	// monitoring sees the alarm.
	corrupt := false
	census, err := s.backend.Census()
	if errors.Is(err, core.ErrCorrupt) {
		corrupt, err = true, nil
	}
	if err != nil {
		return nil, err
	}
	_, paths, watches := s.watches.counts()
	st := s.backend.Status()
	alarms := s.backend.Alarms()
	l := s.stats.latency.snapshot()
	last, lo, hi := s.stats.responses.snapshot()
	// ZooKeeper 3.8's gauges, in the order its metrics provider prints
	// them; its counters and summaries (request latencies by type, queue
	// times) describe its request pipeline and are not printed. Gauges
	// about TLS, connection dropping and local sessions are the constants
	// a ZooKeeper without them reports.
	pairs := [][2]string{
		{"zk_version", version},
		{"zk_server_state", s.mode()},
		{"zk_ephemerals_count", fmt.Sprint(census.Ephemerals)},
		{"zk_num_alive_connections", fmt.Sprint(len(s.connections()))},
		{"zk_avg_latency", javaDouble(l.avg)},
		{"zk_outstanding_requests", fmt.Sprint(s.stats.outstanding.Load())},
		{"zk_znode_count", fmt.Sprint(census.ZnodeCount())},
		{"zk_global_sessions", fmt.Sprint(census.Sessions)},
		{"zk_non_mtls_remote_conn_count", "0"},
		{"zk_last_client_response_size", fmt.Sprint(last)},
		{"zk_packets_sent", fmt.Sprint(s.stats.sent.Load())},
		{"zk_packets_received", fmt.Sprint(s.stats.received.Load())},
		{"zk_max_client_response_size", fmt.Sprint(hi)},
		{"zk_connection_drop_probability", "0.0"},
		{"zk_watch_count", fmt.Sprint(watches)},
		{"zk_auth_failed_count", fmt.Sprint(s.stats.authFailed.Load())},
		{"zk_min_latency", fmt.Sprint(l.min)},
	}
	open, limit, fdsOK := fileDescriptors()
	if fdsOK {
		pairs = append(pairs, [2]string{"zk_max_file_descriptor_count", fmt.Sprint(limit)})
	}
	pairs = append(pairs, [2]string{"zk_approximate_data_size", fmt.Sprint(census.DataSize())})
	if fdsOK {
		pairs = append(pairs, [2]string{"zk_open_file_descriptor_count", fmt.Sprint(open)})
	}
	pairs = append(pairs,
		[2]string{"zk_local_sessions", "0"},
		[2]string{"zk_uptime", fmt.Sprint(time.Since(s.started).Milliseconds())},
		[2]string{"zk_max_latency", fmt.Sprint(l.max)},
		[2]string{"zk_outstanding_tls_handshake", "0"},
		[2]string{"zk_min_client_response_size", fmt.Sprint(lo)},
		[2]string{"zk_non_mtls_local_conn_count", "0"},
		// Not ZooKeeper 3.8's: the watched paths and the last zxid.
		[2]string{"zk_watched_paths", fmt.Sprint(paths)},
		[2]string{"zk_last_zxid", fmt.Sprintf("0x%x", st.Rev)},
		// Janus's: the active alarms (etcd's alarm list), as a count
		// monitoring can compare with 0 and as member:TYPE pairs.
		[2]string{"janus_alarm_count", fmt.Sprint(len(alarms))},
		[2]string{"janus_alarms", alarmList(alarms)},
	)
	if corrupt {
		pairs = slices.DeleteFunc(pairs, func(p [2]string) bool {
			switch p[0] {
			case "zk_ephemerals_count", "zk_znode_count", "zk_global_sessions", "zk_approximate_data_size":
				return true
			}
			return false
		})
	}
	return pairs, nil
}

// alarmList writes alarms as "member:TYPE" separated by commas, "none" for
// none; member 0 is the whole cluster.
func alarmList(alarms []core.Alarm) string {
	if len(alarms) == 0 {
		return "none"
	}
	parts := make([]string, len(alarms))
	for i, a := range alarms {
		parts[i] = fmt.Sprintf("%d:%s", a.Member, a.Type)
	}
	return strings.Join(parts, ",")
}

// Monitor returns mntr's key-value pairs, for the metrics exporter: what
// Prometheus scrapes is what mntr prints.
func (s *Server) Monitor() ([][2]string, error) { return s.mntr() }

// CrossProtocolEvents returns how many watch notifications this member has
// sent ZooKeeper clients for changes etcd clients wrote.
func (s *Server) CrossProtocolEvents() uint64 { return s.watches.fromEtcd.Load() }
