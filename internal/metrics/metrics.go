// Package metrics exports a running Janus member's measurements in
// Prometheus's format, under the names etcd and ZooKeeper operators already
// chart and alert on: etcd's own metric names and labels for what Janus has
// an equivalent of, ZooKeeper's Prometheus names (those of mntr without its
// "zk_" prefix) for the ZooKeeper face, and janus_* for what is Janus's own.
//
// Nothing here is global: a Registry is made per member and served by the
// handlers its owner mounts (/metrics on the HTTP port and on the etcd
// client port).
package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds one member's metrics. Its histogram methods implement
// server.Observer, so the member reports to it directly.
type Registry struct {
	reg *prometheus.Registry

	walFsync      prometheus.Histogram
	backendCommit prometheus.Histogram
	peerRTT       *prometheus.HistogramVec
	applyDuration prometheus.Histogram
	applyGroup    prometheus.Histogram
	// ZooKeeper's names for the same events, in its units (ms), as its
	// Prometheus provider exports them (summaries).
	zkFsync    prometheus.Summary
	zkElection prometheus.Summary
}

// New returns a registry with the process and Go runtime collectors
// (process_*, go_*) and the histograms a member reports into.
func New() *Registry {
	r := &Registry{
		reg: prometheus.NewRegistry(),
		walFsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "disk", Name: "wal_fsync_duration_seconds",
			Help:    "The latency distributions of fsync called by the log (Zab's, etcd's WAL).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		backendCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "disk", Name: "backend_commit_duration_seconds",
			Help:    "The latency distributions of commit called by the backend (one group's write to the store).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		peerRTT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "network", Name: "peer_round_trip_time_seconds",
			Help:    "Round-Trip-Time histogram between peers (a leader's heartbeat to each follower's answer).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"To"}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "janus", Subsystem: "server", Name: "apply_duration_seconds",
			Help:    "How long applying one group of committed entries took (store write, watchers, lessor), without the wait for the log's flush a single member overlaps with it.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		applyGroup: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "janus", Subsystem: "server", Name: "apply_group_entries",
			Help:    "How many entries one applied group held (group commit size).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		zkFsync: prometheus.NewSummary(prometheus.SummaryOpts{
			Name:       "fsynctime",
			Help:       "ZooKeeper's fsync time of the transaction log, in milliseconds.",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		}),
		zkElection: prometheus.NewSummary(prometheus.SummaryOpts{
			Name:       "election_time",
			Help:       "ZooKeeper's time between entering and leaving election, in milliseconds.",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		}),
	}
	r.reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		r.walFsync, r.backendCommit, r.peerRTT, r.applyDuration, r.applyGroup, r.zkFsync, r.zkElection,
		versionGauge("etcd_server_go_version", "server_go_version", runtime.Version(),
			"Which Go version server is running with. 1 for 'server_go_version' label with current version."),
	)
	return r
}

// Registerer is where other parts of the server (the etcd face's gRPC
// interceptors) register their own collectors.
func (r *Registry) Registerer() prometheus.Registerer { return r.reg }

// Gatherer is what a test reads the current values from.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in Prometheus's text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// LogSynced implements zab.Observer.
func (r *Registry) LogSynced(took time.Duration) {
	r.walFsync.Observe(took.Seconds())
	r.zkFsync.Observe(float64(took) / float64(time.Millisecond))
}

// ElectionFinished implements zab.Observer.
func (r *Registry) ElectionFinished(took time.Duration) {
	r.zkElection.Observe(float64(took) / float64(time.Millisecond))
}

// PeerRoundTrip implements zab.Observer. etcd labels the peer by its
// member ID in hexadecimal.
func (r *Registry) PeerRoundTrip(peer uint64, took time.Duration) {
	r.peerRTT.WithLabelValues(strconv.FormatUint(peer, 16)).Observe(took.Seconds())
}

// BackendCommitted implements server.Observer.
func (r *Registry) BackendCommitted(took time.Duration) { r.backendCommit.Observe(took.Seconds()) }

// Applied implements server.Observer.
func (r *Registry) Applied(entries int, took time.Duration) {
	r.applyGroup.Observe(float64(entries))
	r.applyDuration.Observe(took.Seconds())
}

// versionGauge is a gauge that is 1 with a label naming a version, as etcd
// exports its versions.
func versionGauge(name, label, value, help string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{label})
	g.WithLabelValues(value).Set(1)
	return g
}

// promName turns a ZooKeeper mntr key into its Prometheus name: ZooKeeper
// 3.6+ prints each of its metrics in mntr as "zk_" + the name it exports.
func promName(mntrKey string) (string, bool) {
	name, ok := strings.CutPrefix(mntrKey, "zk_")
	return name, ok
}
