package zkapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
)

// quotaStep is one write of TestQuotaEnforcementMatchesZooKeeper.
type quotaStep struct {
	name string
	op   func(c *zk.Conn) error
}

func zcreate(path, data string) func(c *zk.Conn) error {
	return func(c *zk.Conn) error {
		_, err := c.Create(path, []byte(data), 0, zk.WorldACL(zk.PermAll))
		return err
	}
}

func zset(path, data string) func(c *zk.Conn) error {
	return func(c *zk.Conn) error {
		_, err := c.Set(path, []byte(data), -1)
		return err
	}
}

func zdelete(path string) func(c *zk.Conn) error {
	return func(c *zk.Conn) error { return c.Delete(path, -1) }
}

// quotaSteps sets quotas as zkCli's setquota does (the limits node, then
// the stats node, which ZooKeeper fills in) and writes around them: hard
// count and byte limits on /q, a soft count limit on /s, a nested quota on
// /q/n that is the one checked below it.
var quotaSteps = []quotaStep{
	{"create /q", zcreate("/q", "")},
	{"create /s", zcreate("/s", "")},
	{"quota node /q", zcreate("/zookeeper/quota/q", "")},
	{"limits /q", zcreate("/zookeeper/quota/q/zookeeper_limits", "count=-1,bytes=-1,countHardLimit=4,byteHardLimit=10")},
	{"stats /q", zcreate("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0")},
	{"quota node /s", zcreate("/zookeeper/quota/s", "")},
	{"limits /s", zcreate("/zookeeper/quota/s/zookeeper_limits", "count=1,bytes=-1,countHardLimit=-1,byteHardLimit=-1")},
	{"stats /s", zcreate("/zookeeper/quota/s/zookeeper_stats", "count=0,bytes=0")},
	{"create /q/a, count 2", zcreate("/q/a", "12345")},
	{"create /q/b, count 3", zcreate("/q/b", "")},
	{"create /q/c, count 4", zcreate("/q/c", "")},
	{"create /q/d, count 5 over 4", zcreate("/q/d", "")},
	{"set /q/a to 10 bytes", zset("/q/a", "1234567890")},
	{"set /q/a to 11 bytes", zset("/q/a", "12345678901")},
	{"set /q/a shorter", zset("/q/a", "1")},
	{"create /q/c/x with 10 bytes, over count", zcreate("/q/c/x", "1234567890")},
	{"delete /q/b", zdelete("/q/b")},
	{"create /q/c/x, count 4 again", zcreate("/q/c/x", "")},
	{"create /q/c/x/y, count 5", zcreate("/q/c/x/y", "")},
	{"soft: create /s/1", zcreate("/s/1", "")},
	{"soft: create /s/2", zcreate("/s/2", "")},
	{"unlimited path", zcreate("/free", "1234567890123")},
}

// TestQuotaEnforcementMatchesZooKeeper runs quotaSteps against Debian's
// ZooKeeper 3.8 with zookeeper.enforceQuota=true and against Janus with
// EnforceQuota, and compares every answer; with enforcement off Janus
// refuses nothing, as ZooKeeper by default.
func TestQuotaEnforcementMatchesZooKeeper(t *testing.T) {
	run := func(addr string) []string {
		c, _ := connect(t, addr, 10*time.Second)
		defer c.Close()
		var out []string
		for _, s := range quotaSteps {
			out = append(out, fmt.Sprint(s.op(c)))
		}
		return out
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{JVMFlags: []string{"-Dzookeeper.enforceQuota=true"}})
	want := run(ref.Addr)
	got := run(startJanus(t, zkapi.Config{EnforceQuota: true}).Addr)
	refused := 0
	for i, s := range quotaSteps {
		if got[i] != want[i] {
			t.Errorf("%s: Janus %s, ZooKeeper %s", s.name, got[i], want[i])
		}
		if want[i] != "<nil>" {
			refused++
		}
		t.Logf("%-45s %s", s.name, want[i])
	}
	if refused == 0 {
		t.Fatal("ZooKeeper refused nothing: is enforceQuota on?")
	}
	// Without enforcement a step may fail for its own reason (a create
	// that went through earlier), never for a quota.
	for i, res := range run(startJanus(t, zkapi.Config{}).Addr) {
		if strings.Contains(res, "-125") {
			t.Errorf("%s without enforcement: %s", quotaSteps[i].name, res)
		}
	}
}
