package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/testenv"
)

// scrape reads url's /metrics into metric families.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// value sums a family's samples whose labels include every given pair
// (a counter's or gauge's value, a histogram's or summary's count).
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, found
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		ok := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// startMember runs one member of an in-process ensemble (or a single
// member when peers is empty) with --listen-metrics-urls, until the test
// ends.
func startMember(t *testing.T, id int, peers string) Addrs {
	t.Helper()
	args := []string{"--data-dir", t.TempDir(), "--id", fmt.Sprint(id),
		"--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--listen-metrics-urls", "http://127.0.0.1:0"}
	if peers != "" {
		args = append(args, "--peers", peers, "--election-timeout", "500ms", "--heartbeat-interval", "50ms")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Addrs, 1)
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() { done <- run(ctx, args, &syncWriter{w: &stderr}, ready) }()
	select {
	case a := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("member %d stopped with %v", id, err)
			}
		})
		return a
	case err := <-done:
		cancel()
		t.Fatalf("member %d did not start: %v\n%s", id, err, stderr.String())
	}
	return Addrs{}
}

// TestMetricsNameAndMove runs a short mixed workload through both faces of
// a 3-member ensemble and checks that each metric an etcd or ZooKeeper
// dashboard reads exists, on every address that serves /metrics, and moved
// as the workload says it should.
func TestMetricsNameAndMove(t *testing.T) {
	peers := fmt.Sprintf("1=%s,2=%s,3=%s", freeAddr(t), freeAddr(t), freeAddr(t))
	members := make([]Addrs, 3)
	for i := range members {
		members[i] = startMember(t, i+1, peers)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Find the leader: the member whose is_leader is 1, once every member
	// has one.
	leader := -1
	for deadline := time.Now().Add(30 * time.Second); leader < 0; {
		led := 0
		for i, a := range members {
			fams := scrape(t, "http://"+a.HTTP+"/metrics")
			if v, _ := value(fams, "etcd_server_has_leader"); v == 1 {
				led++
			}
			if v, _ := value(fams, "etcd_server_is_leader"); v == 1 {
				leader = i
			}
		}
		if led < len(members) {
			leader = -1
		}
		if leader < 0 {
			if time.Now().After(deadline) {
				t.Fatal("no member reports etcd_server_is_leader 1")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	lead := members[leader]
	// Both clients talk to the leader, so that its gRPC and ZooKeeper
	// counters see the whole workload.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{lead.Etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	before := scrape(t, "http://"+lead.HTTP+"/metrics")

	// The workload: etcd puts, a range, a txn, a lease with a key; a
	// ZooKeeper session with a persistent and an ephemeral znode, through
	// the leader's ZooKeeper face.
	const puts = 20
	for i := range puts {
		if _, err := cli.Put(ctx, fmt.Sprintf("/metrics/k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Get(ctx, "/metrics/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/metrics/txn", "x")).Commit(); err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/metrics/leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	conn, _, err := zk.Connect([]string{lead.ZK}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Create("/metrics/zk", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/metrics/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := conn.Get("/metrics/zk"); err != nil {
		t.Fatal(err)
	}
	// An etcd watcher that receives one event.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := cli.Watch(wctx, "/metrics/watched")
	if _, err := cli.Put(ctx, "/metrics/watched", "x"); err != nil {
		t.Fatal(err)
	}
	if wr := <-wch; len(wr.Events) != 1 {
		t.Fatalf("watch: %+v", wr)
	}

	after := scrape(t, "http://"+lead.HTTP+"/metrics")
	grew := func(name string, by float64, labels ...string) func() error {
		return func() error {
			b, _ := value(before, name, labels...)
			a, ok := value(after, name, labels...)
			if !ok {
				return fmt.Errorf("missing")
			}
			if a-b < by {
				return fmt.Errorf("went from %v to %v, want at least +%v", b, a, by)
			}
			return nil
		}
	}
	is := func(name string, cmp func(float64) bool, want string, labels ...string) func() error {
		return func() error {
			a, ok := value(after, name, labels...)
			if !ok {
				return fmt.Errorf("missing")
			}
			if !cmp(a) {
				return fmt.Errorf("is %v, want %s", a, want)
			}
			return nil
		}
	}
	eq := func(v float64) func(float64) bool { return func(a float64) bool { return a == v } }
	atLeast := func(v float64) func(float64) bool { return func(a float64) bool { return a >= v } }
	writes := float64(puts + 5) // puts, txn, grant, leased put; ZooKeeper's two creates and the session come on top
	for _, c := range []struct {
		name  string
		check func() error
	}{
		// etcd's server gauges and counters.
		{"etcd_server_has_leader", is("etcd_server_has_leader", eq(1), "1")},
		{"etcd_server_is_leader", is("etcd_server_is_leader", eq(1), "1 on the leader")},
		{"etcd_server_leader_changes_seen_total", is("etcd_server_leader_changes_seen_total", atLeast(1), ">= 1")},
		{"etcd_server_proposals_committed_total", grew("etcd_server_proposals_committed_total", writes)},
		{"etcd_server_proposals_applied_total", grew("etcd_server_proposals_applied_total", writes)},
		{"etcd_server_proposals_pending", is("etcd_server_proposals_pending", atLeast(0), ">= 0")},
		{"etcd_server_proposals_failed_total", func() error {
			// Members' own proposals may fail while the ensemble forms;
			// none of the workload's may with a stable leader.
			b, _ := value(before, "etcd_server_proposals_failed_total")
			if a, ok := value(after, "etcd_server_proposals_failed_total"); !ok || a != b {
				return fmt.Errorf("went from %v to %v (present: %v), want no change", b, a, ok)
			}
			return nil
		}},
		{"etcd_server_slow_apply_total", is("etcd_server_slow_apply_total", atLeast(0), ">= 0")},
		{"etcd_server_version", is("etcd_server_version", eq(1), "1", "server_version", "3.7.3")},
		// etcd's disk, mvcc and network histograms and gauges.
		{"etcd_disk_wal_fsync_duration_seconds", grew("etcd_disk_wal_fsync_duration_seconds", 1)},
		{"etcd_disk_backend_commit_duration_seconds", grew("etcd_disk_backend_commit_duration_seconds", 1)},
		{"etcd_mvcc_db_total_size_in_bytes", is("etcd_mvcc_db_total_size_in_bytes", atLeast(1), "> 0")},
		{"etcd_mvcc_db_total_size_in_use_in_bytes", is("etcd_mvcc_db_total_size_in_use_in_bytes", atLeast(1), "> 0")},
		{"etcd_debugging_mvcc_keys_total", grew("etcd_debugging_mvcc_keys_total", puts+2+2)},
		{"etcd_network_peer_round_trip_time_seconds", grew("etcd_network_peer_round_trip_time_seconds", 1)},
		{"etcd_debugging_mvcc_watcher_total", is("etcd_debugging_mvcc_watcher_total", eq(1), "1")},
		{"etcd_debugging_mvcc_watch_stream_total", is("etcd_debugging_mvcc_watch_stream_total", eq(1), "1")},
		{"etcd_debugging_mvcc_events_total", grew("etcd_debugging_mvcc_events_total", 1)},
		// gRPC, labelled as etcd's grpc_prometheus labels it.
		{"grpc_server_handled_total Put", grew("grpc_server_handled_total", puts+1, "grpc_service", "etcdserverpb.KV", "grpc_method", "Put", "grpc_code", "OK")},
		{"grpc_server_started_total Range", grew("grpc_server_started_total", 1, "grpc_method", "Range")},
		{"grpc_server_msg_received_total", grew("grpc_server_msg_received_total", puts)},
		{"grpc_server_msg_sent_total", grew("grpc_server_msg_sent_total", puts)},
		{"grpc_server_handling_seconds", grew("grpc_server_handling_seconds", puts, "grpc_method", "Put")},
		// The process and the Go runtime.
		{"process_resident_memory_bytes", is("process_resident_memory_bytes", atLeast(1), "> 0")},
		{"process_open_fds", is("process_open_fds", atLeast(1), "> 0")},
		{"go_goroutines", is("go_goroutines", atLeast(1), "> 0")},
		// ZooKeeper's names, as mntr prints them.
		{"znode_count", grew("znode_count", puts+2+2)},
		// The ephemeral znode and the etcd key on a lease, which
		// ZooKeeper clients see as an ephemeral of that lease.
		{"ephemerals_count", is("ephemerals_count", eq(2), "2")},
		{"num_alive_connections", is("num_alive_connections", eq(1), "1")},
		{"watch_count", is("watch_count", atLeast(0), ">= 0")},
		{"outstanding_requests", is("outstanding_requests", eq(0), "0")},
		{"approximate_data_size", grew("approximate_data_size", 1)},
		{"packets_received", grew("packets_received", 3)},
		{"avg_latency", is("avg_latency", atLeast(0), ">= 0")},
		{"fsynctime", grew("fsynctime", 1)},
		{"election_time", is("election_time", atLeast(0), ">= 0 (1 per member that looked for a leader)")},
		{"quorum_size", is("quorum_size", eq(3), "3")},
		{"synced_followers", is("synced_followers", eq(2), "2 on the leader")},
		// Janus's own.
		{"janus_server_apply_group_entries", grew("janus_server_apply_group_entries", 1)},
		{"janus_server_apply_duration_seconds", grew("janus_server_apply_duration_seconds", 1)},
		{"janus_leases", is("janus_leases", eq(2), "2 (the etcd lease and the ZooKeeper session)")},
		{"janus_server_stopped", is("janus_server_stopped", eq(0), "0")},
		// Revisions by the face that made them: the puts, the txn, the
		// leased put and the watched put; ZooKeeper's two creates.
		{"janus_server_writes_applied_total etcd", grew("janus_server_writes_applied_total", puts+3, "origin", "etcd")},
		{"janus_server_writes_applied_total zookeeper", grew("janus_server_writes_applied_total", 2, "origin", "zookeeper")},
		// No watcher of one face saw the other's writes here (see
		// TestCrossProtocolEventsMetric for when one does).
		{"janus_cross_protocol_events_total", is("janus_cross_protocol_events_total", eq(0), "0", "from", "etcd")},
		{"janus_zab_follower_lag_entries", func() error {
			f, ok := after["janus_zab_follower_lag_entries"]
			if !ok || len(f.GetMetric()) != 2 {
				return fmt.Errorf("want one series per follower on the leader, got %v", f)
			}
			return nil
		}},
	} {
		if err := c.check(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}

	// Every metric the Grafana dashboard in deploy/ queries exists.
	for _, name := range dashboardMetrics(t, "deploy/grafana/janus.json") {
		if _, ok := after[name]; ok {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if f, ok := after[base]; !ok || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("the dashboard queries %s, which the leader does not export", name)
		}
	}

	// Every address that serves /metrics serves the same registry: the
	// etcd client port (next to gRPC, as etcd) and --listen-metrics-urls.
	for _, url := range []string{"http://" + lead.Etcd + "/metrics", "http://" + lead.Metrics[0] + "/metrics"} {
		fams := scrape(t, url)
		if _, ok := value(fams, "etcd_server_has_leader"); !ok {
			t.Errorf("%s has no etcd_server_has_leader", url)
		}
	}
	// A follower knows the leader too and is not one.
	follower := members[(leader+1)%len(members)]
	ff := scrape(t, "http://"+follower.HTTP+"/metrics")
	if v, _ := value(ff, "etcd_server_has_leader"); v != 1 {
		t.Errorf("follower: etcd_server_has_leader %v", v)
	}
	if v, _ := value(ff, "etcd_server_is_leader"); v != 0 {
		t.Errorf("follower: etcd_server_is_leader %v", v)
	}
	if code, body := getURL(t, "http://"+lead.Etcd+"/health"); code != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
		t.Errorf("/health on the etcd client port: %d %s", code, body)
	}
}

// TestEtcdctlCheckDatascale runs etcdctl's own data-scale check, which
// writes 10,000 keys and reads process_resident_memory_bytes from the
// client URL's /metrics before and after, as it would against etcd.
func TestEtcdctlCheckDatascale(t *testing.T) {
	etcdctl := testenv.EtcdctlPath(t)
	a := startMember(t, 1, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, etcdctl, "--endpoints", a.Etcd, "check", "datascale", "--load", "s").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl check datascale: %v\n%s", err, out)
	}
	last := string(out[bytes.LastIndexByte(bytes.TrimRight(out, "\n"), '\n')+1:])
	if !strings.Contains(string(out), "PASS: Approximate system memory used") {
		t.Fatalf("etcdctl check datascale did not pass:\n%s", out)
	}
	t.Logf("etcdctl check datascale: %s", strings.TrimSpace(last[strings.LastIndex(last, "PASS"):]))
}

// dashboardMetrics returns the metric names a Grafana dashboard's queries
// read: every name followed by a label selector, as the dashboard writes
// each one.
func dashboardMetrics(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	seen := map[string]bool{}
	var names []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricRef.FindAllStringSubmatch(tg.Expr, -1) {
				if !seen[m[1]] {
					seen[m[1]] = true
					names = append(names, m[1])
				}
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("%s: only %d metrics found in its queries", path, len(names))
	}
	return names
}

var metricRef = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// TestCrossProtocolEventsMetric writes through each face with a real
// client while a real client of the other face watches, and reads the
// crossing from /metrics: a write the same face watches does not count.
func TestCrossProtocolEventsMetric(t *testing.T) {
	a := startMember(t, 1, "")
	url := "http://" + a.HTTP + "/metrics"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	conn, _, err := zk.Connect([]string{a.ZK}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const toZK, toEtcd = "etcd", "zookeeper" // the from label of each direction
	crossed := func(from string) float64 {
		v, ok := value(scrape(t, url), "janus_cross_protocol_events_total", "from", from)
		if !ok {
			t.Fatalf("no janus_cross_protocol_events_total{from=%q}", from)
		}
		return v
	}
	// waitCrossed waits until the counter reads want, which it does once
	// the face has counted what its client already received; then it must
	// stay there.
	waitCrossed := func(from string, want float64) {
		t.Helper()
		got := crossed(from)
		for deadline := time.Now().Add(20 * time.Second); got < want && time.Now().Before(deadline); got = crossed(from) {
			time.Sleep(20 * time.Millisecond)
		}
		if got != want {
			t.Fatalf("janus_cross_protocol_events_total{from=%q} = %v, want %v", from, got, want)
		}
	}
	waitCrossed(toZK, 0)
	waitCrossed(toEtcd, 0)

	// etcd writes, a ZooKeeper watcher fires: +1 from etcd to ZooKeeper.
	_, _, zw, err := conn.ExistsW("/cross/from-etcd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/cross/from-etcd", "x"); err != nil {
		t.Fatal(err)
	}
	if ev := <-zw; ev.Type != zk.EventNodeCreated || ev.Path != "/cross/from-etcd" {
		t.Fatalf("ZooKeeper watch: %+v", ev)
	}
	waitCrossed(toZK, 1)

	// ZooKeeper writes, an etcd watcher receives it: +1 from ZooKeeper to
	// etcd.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := cli.Watch(wctx, "/cross/from-zk", clientv3.WithCreatedNotify())
	<-wch // the watcher is registered
	if _, err := conn.Create("/cross/from-zk", []byte("z"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if wr := <-wch; len(wr.Events) != 1 || string(wr.Events[0].Kv.Key) != "/cross/from-zk" {
		t.Fatalf("etcd watch: %+v", wr)
	}
	waitCrossed(toEtcd, 1)

	// Each face watching its own clients' writes crosses nothing.
	if _, err := cli.Put(ctx, "/cross/from-zk", "etcd"); err != nil {
		t.Fatal(err)
	}
	if wr := <-wch; len(wr.Events) != 1 {
		t.Fatalf("etcd watch: %+v", wr)
	}
	_, _, zw, err = conn.GetW("/cross/from-etcd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set("/cross/from-etcd", []byte("zk"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-zw; ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("ZooKeeper watch: %+v", ev)
	}
	waitCrossed(toZK, 1)
	waitCrossed(toEtcd, 1)
	// Crossing again counts again, after the same-face writes before it.
	if _, err := conn.Set("/cross/from-zk", []byte("z2"), -1); err != nil {
		t.Fatal(err)
	}
	if wr := <-wch; len(wr.Events) != 1 {
		t.Fatalf("etcd watch: %+v", wr)
	}
	waitCrossed(toEtcd, 2)

	// A watcher replaying history (from revision 1, read back from the
	// store) knows each event's origin too: the create and the set came
	// from ZooKeeper, the put between them from etcd.
	hist := cli.Watch(wctx, "/cross/from-zk", clientv3.WithRev(1))
	for n := 0; n < 3; {
		wr := <-hist
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		n += len(wr.Events)
	}
	waitCrossed(toEtcd, 4)

	// Every member counts the writes each face proposed.
	fams := scrape(t, url)
	for origin, atLeast := range map[string]float64{"etcd": 2, "zookeeper": 2} {
		if v, _ := value(fams, "janus_server_writes_applied_total", "origin", origin); v < atLeast {
			t.Errorf("janus_server_writes_applied_total{origin=%q} = %v, want >= %v", origin, v, atLeast)
		}
	}
}
