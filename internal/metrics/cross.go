package metrics

import "github.com/prometheus/client_golang/prometheus"

var descCrossEvents = prometheus.NewDesc("janus_cross_protocol_events_total",
	"Watch events this member delivered to one face's watchers for changes the other face's clients wrote: an etcd watch event per key, a ZooKeeper notification per watcher.",
	[]string{"from", "to"}, nil)

// WatchCrossProtocol registers a collector of the changes that crossed from
// one face to the other: toEtcd counts the events the etcd face sent its
// watchers for ZooKeeper clients' writes (etcdapi.Server.CrossProtocolEvents),
// toZooKeeper the notifications the ZooKeeper face sent for etcd clients'
// writes (zkapi.Server.CrossProtocolEvents).
func (r *Registry) WatchCrossProtocol(toEtcd, toZooKeeper func() uint64) {
	r.reg.MustRegister(crossCollector{toEtcd: toEtcd, toZooKeeper: toZooKeeper})
}

type crossCollector struct{ toEtcd, toZooKeeper func() uint64 }

func (c crossCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c crossCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descCrossEvents, prometheus.CounterValue, float64(c.toEtcd()), "zookeeper", "etcd")
	ch <- prometheus.MustNewConstMetric(descCrossEvents, prometheus.CounterValue, float64(c.toZooKeeper()), "etcd", "zookeeper")
}
