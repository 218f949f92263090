package zkapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
)

// superClient connects to addr as the super user of superCred.
func superClient(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _ := janustest.ZKClient(t, addr, 10*time.Second)
	if err := c.AddAuth("digest", []byte(superCred)); err != nil {
		t.Fatal(err)
	}
	return c
}

// changeReconfig runs a reconfig that must commit. Until the leader has
// counted the followers of a new ensemble as synchronized (once a tick
// after they synchronize), it answers NewConfigNoQuorum, as ZooKeeper's
// leader does until its learners are synced: that answer, and only that
// one, is waited out.
func changeReconfig(t *testing.T, reconfig func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := reconfig()
		if err == nil {
			return
		}
		if err.Error() != "unknown error: -13" || time.Now().After(deadline) {
			t.Fatalf("reconfig: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReconfigSeenByEveryMember: a configuration committed through one
// member's face fires /zookeeper/config watches set on another member's
// (which learns of it from the log, not from its own reconfig), and that
// member's srvr and conf show its new role.
func TestReconfigSeenByEveryMember(t *testing.T) {
	e := startJanusEnsemble(t, 3, zkapi.Config{ReconfigEnabled: true, SuperDigest: superDigest(superCred), FourLetterWhitelist: []string{"*"}})
	leader := e.Leader(t)
	follower := (leader + 1) % 3
	other := (leader + 2) % 3

	watcher, _ := janustest.ZKClient(t, e.members[other].Addr, 10*time.Second)
	before, _, events, err := watcher.GetW("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	c := superClient(t, e.members[follower].Addr)
	// other becomes an observer, with an election port of its own.
	line := ""
	for _, l := range strings.Split(string(before), "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("server.%d=", other+1)) {
			server, client, _ := strings.Cut(l, ";")
			parts := strings.Split(server, ":")
			line = fmt.Sprintf("%s:%s:%d:observer;%s", parts[0], parts[1], testenv.FreePorts(t, 1)[0], client)
		}
	}
	if line == "" {
		t.Fatalf("server.%d not in\n%s", other+1, before)
	}
	changeReconfig(t, func() error { _, err := c.IncrementalReconfig([]string{line}, nil, -1); return err })
	select {
	case ev := <-events:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/zookeeper/config" {
			t.Fatalf("watch on another member: %+v", ev)
		}
	case <-time.After(time.Minute):
		t.Fatal("the watch on another member never fired")
	}
	after, _, err := watcher.Get("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(after), line) {
		t.Fatalf("config on the other member:\n%s\nlacks %s", after, line)
	}
	srvr, err := testenv.FourLetterWord(t.Context(), e.members[other].Addr, "srvr")
	if err != nil || !strings.Contains(srvr, "Mode: observer\n") {
		t.Errorf("srvr of the new observer: %v\n%s", err, srvr)
	}
	conf, err := testenv.FourLetterWord(t.Context(), e.members[other].Addr, "conf")
	if err != nil || !strings.Contains(conf, "peerType=1\n") || !strings.Contains(conf, "membership: \n") || !strings.Contains(conf, line+"\n") {
		t.Errorf("conf of the new observer: %v\n%s", err, conf)
	}
}

// TestReconfigOnASingleMember: a member started without peers answers
// reconfig as a standalone ZooKeeper does, Unimplemented, and shows itself
// as the configuration.
func TestReconfigOnASingleMember(t *testing.T) {
	j := startJanus(t, zkapi.Config{ReconfigEnabled: true, SuperDigest: superDigest(superCred)})
	c := superClient(t, j.Addr)
	data, stat, err := c.Get("/zookeeper/config")
	if err != nil || !strings.HasPrefix(string(data), "server.1=") || !strings.HasSuffix(string(data), "\nversion=0") || stat.Version != -1 {
		t.Fatalf("/zookeeper/config = %q %+v %v", data, stat, err)
	}
	// go-zookeeper has no error value for Unimplemented (-6).
	_, err = c.IncrementalReconfig(nil, []string{"9"}, -1)
	if err == nil || err.Error() != "unknown error: -6" {
		t.Fatalf("reconfig on a single member: %v, want Unimplemented (-6)", err)
	}
}
