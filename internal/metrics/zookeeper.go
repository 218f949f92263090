package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Monitor is what the ZooKeeper collector reads at each scrape: the
// ZooKeeper face's mntr pairs (zkapi.Server has it).
type Monitor interface {
	Monitor() ([][2]string, error)
}

// WatchZooKeeper registers a collector that exports every numeric mntr
// value under ZooKeeper's Prometheus name (the key without "zk_"), so the
// two can never disagree: ZooKeeper's own dashboards and alerts
// (znode_count, watch_count, num_alive_connections, outstanding_requests,
// avg_latency, ...) read the same numbers mntr prints.
func (r *Registry) WatchZooKeeper(m Monitor) {
	r.reg.MustRegister(&zkCollector{m: m})
}

type zkCollector struct{ m Monitor }

// Describe sends nothing: the set of mntr keys is the face's to decide,
// which makes this an unchecked collector.
func (c *zkCollector) Describe(chan<- *prometheus.Desc) {}

func (c *zkCollector) Collect(ch chan<- prometheus.Metric) {
	pairs, err := c.m.Monitor()
	if err != nil {
		return
	}
	for _, p := range pairs {
		name, ok := promName(p[0])
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(p[1], 64)
		if err != nil {
			continue // zk_version, zk_server_state, zk_last_zxid in hex
		}
		desc := prometheus.NewDesc(name, "ZooKeeper's "+p[0]+", as mntr prints it.", nil, nil)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
	}
}
