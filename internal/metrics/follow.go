package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Follow is one reading of a running migration follower (janus migrate
// --follow): what migrate.FollowState reports.
type Follow struct {
	Applied  int64         // source events applied to the target
	Pending  int           // source events received, not yet applied
	Lag      time.Duration // how long the oldest pending event has waited
	Resyncs  int           // re-lists after the change stream was lost
	CaughtUp bool          // a cut-over has applied everything
}

var (
	descFollowApplied = prometheus.NewDesc("janus_migrate_applied_events_total",
		"Source events the migration follower has applied to the target.", nil, nil)
	descFollowPending = prometheus.NewDesc("janus_migrate_lag_events",
		"Source events received and not yet applied to the target.", nil, nil)
	descFollowLag = prometheus.NewDesc("janus_migrate_lag_seconds",
		"How long the oldest pending source event has waited (0 when none is pending).", nil, nil)
	descFollowResyncs = prometheus.NewDesc("janus_migrate_resyncs_total",
		"How often the follower re-listed the source after losing its change stream.", nil, nil)
	descFollowCaughtUp = prometheus.NewDesc("janus_migrate_caught_up",
		"1 once a cut-over has applied everything the source held when it began.", nil, nil)
)

// WatchFollow registers a collector that reads a migration follower's
// status at each scrape.
func (r *Registry) WatchFollow(status func() Follow) {
	r.reg.MustRegister(followCollector(status))
}

type followCollector func() Follow

func (c followCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c followCollector) Collect(ch chan<- prometheus.Metric) {
	f := c()
	ch <- prometheus.MustNewConstMetric(descFollowApplied, prometheus.CounterValue, float64(f.Applied))
	ch <- prometheus.MustNewConstMetric(descFollowPending, prometheus.GaugeValue, float64(f.Pending))
	ch <- prometheus.MustNewConstMetric(descFollowLag, prometheus.GaugeValue, f.Lag.Seconds())
	ch <- prometheus.MustNewConstMetric(descFollowResyncs, prometheus.CounterValue, float64(f.Resyncs))
	ch <- prometheus.MustNewConstMetric(descFollowCaughtUp, prometheus.GaugeValue, boolValue(f.CaughtUp))
}
