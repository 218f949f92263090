package metrics

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zab"
)

// Member is what the member collector reads at each scrape:
// server.Member has these methods.
type Member interface {
	Status() core.Status
	Counters() server.Counters
	Replication() zab.Status
	Alarms() []core.Alarm
	Census() (core.Census, error)
}

// MemberOptions are values the collector reports as they are configured.
type MemberOptions struct {
	// Version is the etcd server version Janus reports (etcd_server_version).
	Version string
}

// WatchMember registers a collector that reads m's state at each scrape:
// etcd's server, mvcc and alarm gauges and Janus's lease count.
func (r *Registry) WatchMember(m Member, opts MemberOptions) {
	r.reg.MustRegister(&memberCollector{m: m, opts: opts})
	if opts.Version != "" {
		r.reg.MustRegister(versionGauge("etcd_server_version", "server_version", opts.Version,
			"Which version is running. 1 for 'server_version' label with current version."))
	}
}

var (
	descHasLeader = prometheus.NewDesc("etcd_server_has_leader",
		"Whether or not a leader exists. 1 is existence, 0 is not.", nil, nil)
	descIsLeader = prometheus.NewDesc("etcd_server_is_leader",
		"Whether or not this member is a leader. 1 if is, 0 otherwise.", nil, nil)
	descLeaderChanges = prometheus.NewDesc("etcd_server_leader_changes_seen_total",
		"The number of leader changes seen.", nil, nil)
	descCommitted = prometheus.NewDesc("etcd_server_proposals_committed_total",
		"The total number of consensus proposals committed.", nil, nil)
	descApplied = prometheus.NewDesc("etcd_server_proposals_applied_total",
		"The total number of consensus proposals applied.", nil, nil)
	descPending = prometheus.NewDesc("etcd_server_proposals_pending",
		"The current number of pending proposals to commit.", nil, nil)
	descFailed = prometheus.NewDesc("etcd_server_proposals_failed_total",
		"The total number of failed proposals seen.", nil, nil)
	descSlowApply = prometheus.NewDesc("etcd_server_slow_apply_total",
		"The total number of slow apply requests (likely overloaded from slow disk).", nil, nil)
	descServerID = prometheus.NewDesc("etcd_server_id",
		"Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.", []string{"server_id"}, nil)
	descQuota = prometheus.NewDesc("etcd_server_quota_backend_bytes",
		"Current backend storage quota size in bytes.", nil, nil)
	descDBSize = prometheus.NewDesc("etcd_mvcc_db_total_size_in_bytes",
		"Total size of the underlying database physically allocated in bytes.", nil, nil)
	descDBInUse = prometheus.NewDesc("etcd_mvcc_db_total_size_in_use_in_bytes",
		"Total size of the underlying database logically in use in bytes (Janus's store has no free pages: the same as the allocated size).", nil, nil)
	descKeys = prometheus.NewDesc("etcd_debugging_mvcc_keys_total",
		"Total number of keys.", nil, nil)
	descRev = prometheus.NewDesc("etcd_debugging_mvcc_current_revision",
		"The current revision of store.", nil, nil)
	descCompactRev = prometheus.NewDesc("etcd_debugging_mvcc_compact_revision",
		"The revision of the last compaction in store.", nil, nil)
	descAlarms = prometheus.NewDesc("janus_server_alarms",
		"Active alarms of each type (etcd's alarm list): how many members, or the whole cluster, raised it; 0 when none.", []string{"alarm"}, nil)
	descStopped = prometheus.NewDesc("janus_server_stopped",
		"1 if this member stopped applying the log after an I/O failure (it then serves nothing), 0 otherwise.", nil, nil)
	descLeases = prometheus.NewDesc("janus_leases",
		"Leases alive, ZooKeeper sessions included (a session is a lease).", nil, nil)
	descLogSegments = prometheus.NewDesc("janus_log_segments",
		"Segment files the replicated log holds.", nil, nil)
	descSyncedFollowers = prometheus.NewDesc("synced_followers",
		"ZooKeeper's synced_followers, on the leader: voting members in step with its log.", nil, nil)
	descSyncedObservers = prometheus.NewDesc("synced_observers",
		"ZooKeeper's synced_observers, on the leader: observers in step with its log.", nil, nil)
	descQuorumSize = prometheus.NewDesc("quorum_size",
		"ZooKeeper's quorum_size: the number of voting members.", nil, nil)
	descPeerLag = prometheus.NewDesc("janus_zab_follower_lag_entries",
		"On the leader: log entries each member has not yet acknowledged.", []string{"To"}, nil)
	descEpoch = prometheus.NewDesc("janus_zab_epoch",
		"The Zab epoch this member follows or leads (etcd's raft term).", nil, nil)
	descWrites = prometheus.NewDesc("janus_server_writes_applied_total",
		"Applied entries that changed the state (each made a revision), by the face that proposed them: etcd, zookeeper, member (its own: expired leases and sessions), unknown (logged before origins were kept).", []string{"origin"}, nil)
)

type memberCollector struct {
	m    Member
	opts MemberOptions
}

func (c *memberCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *memberCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.Status()
	rep := c.m.Replication()
	counts := c.m.Counters()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descHasLeader, boolValue(st.LeaderID != 0))
	gauge(descIsLeader, boolValue(st.LeaderID != 0 && st.LeaderID == st.MemberID))
	counter(descLeaderChanges, float64(rep.LeaderChanges))
	gauge(descCommitted, float64(rep.CommittedIndex))
	gauge(descApplied, float64(rep.AppliedIndex))
	// Entries in the log not yet applied: proposals this member has
	// written but whose outcome it has not reached.
	gauge(descPending, float64(rep.LastIndex-min(rep.LastIndex, rep.AppliedIndex)))
	counter(descFailed, float64(counts.ProposalsFailed))
	counter(descSlowApply, float64(counts.SlowApplies))
	for o, n := range counts.Writes {
		ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(n), core.Origin(o).String())
	}
	gauge(descServerID, 1, strconv.FormatUint(st.MemberID, 16))
	if st.QuotaBytes > 0 { // none when the quota is off
		gauge(descQuota, float64(st.QuotaBytes))
	}
	gauge(descDBSize, float64(st.DBSize))
	gauge(descDBInUse, float64(st.DBSize))
	gauge(descRev, float64(st.Rev))
	gauge(descCompactRev, float64(st.CompactRev))
	gauge(descStopped, boolValue(st.Err != nil))
	gauge(descLogSegments, float64(rep.Segments))
	gauge(descEpoch, float64(rep.Epoch))
	for id, acked := range rep.PeerAcked {
		gauge(descPeerLag, float64(rep.LastIndex-min(acked, rep.LastIndex)), strconv.FormatUint(id, 16))
	}
	voters := 0
	for _, m := range st.Members {
		if !m.IsObserver {
			voters++
		}
	}
	gauge(descQuorumSize, float64(voters))
	if len(rep.PeerAcked) > 0 { // the leader: ZooKeeper prints these there only
		synced, observers := 0, 0
		for id := range rep.PeerAcked {
			if slices.ContainsFunc(st.Members, func(m core.ClusterMember) bool { return m.ID == id && m.IsObserver }) {
				observers++
			} else {
				synced++
			}
		}
		gauge(descSyncedFollowers, float64(synced))
		gauge(descSyncedObservers, float64(observers))
	}
	raised := map[core.AlarmType]int{core.AlarmNoSpace: 0, core.AlarmCorrupt: 0}
	for _, a := range c.m.Alarms() {
		raised[a.Type]++
	}
	for t, n := range raised {
		gauge(descAlarms, float64(n), t.String())
	}
	// The member keeps these counts as it applies: no walk of the state.
	// One that cannot read (stopped, corrupt) leaves them out rather than
	// report 0.
	if census, err := c.m.Census(); err == nil {
		gauge(descKeys, float64(census.Keys))
		gauge(descLeases, float64(census.Leases))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var (
	descWatchStreams = prometheus.NewDesc("etcd_debugging_mvcc_watch_stream_total",
		"Total number of watch streams.", nil, nil)
	descWatchers = prometheus.NewDesc("etcd_debugging_mvcc_watcher_total",
		"Total number of watchers.", nil, nil)
	descWatchEvents = prometheus.NewDesc("etcd_debugging_mvcc_events_total",
		"Total number of events sent by this member.", nil, nil)
)

// WatchEtcdWatches registers a collector of the etcd face's watch fan-out
// (etcdapi.Server.WatchStats): streams, watchers and events sent, under
// etcd's names. The ZooKeeper face's is in its mntr (watch_count).
func (r *Registry) WatchEtcdWatches(stats func() (streams, watchers int64, events uint64)) {
	r.reg.MustRegister(watchCollector(stats))
}

type watchCollector func() (int64, int64, uint64)

func (c watchCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c watchCollector) Collect(ch chan<- prometheus.Metric) {
	streams, watchers, events := c()
	ch <- prometheus.MustNewConstMetric(descWatchStreams, prometheus.GaugeValue, float64(streams))
	ch <- prometheus.MustNewConstMetric(descWatchers, prometheus.GaugeValue, float64(watchers))
	ch <- prometheus.MustNewConstMetric(descWatchEvents, prometheus.CounterValue, float64(events))
}
