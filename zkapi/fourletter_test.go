package zkapi_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
)

// TestStatResets checks srst and crst on Janus alone (the differential
// test compares them with ZooKeeper's where ZooKeeper is installed).
func TestStatResets(t *testing.T) {
	j := startJanus(t, zkapi.Config{FourLetterWhitelist: []string{"*"}})
	checkStatResets(t, j.Addr)
}

// TestDirs checks that dirs and conf report the member's state and log
// directories and the bytes in them.
func TestDirs(t *testing.T) {
	j := startJanus(t, zkapi.Config{FourLetterWhitelist: []string{"*"}})
	c, _ := connect(t, j.Addr, 10*time.Second)
	if _, err := c.Create("/d", []byte(strings.Repeat("x", 1000)), 0, openACL); err != nil {
		t.Fatal(err)
	}
	word := func(cmd string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := testenv.FourLetterWord(ctx, j.Addr, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
	dirs := word("dirs")
	m := regexp.MustCompile(`^datadir_size: (\d+)\nlogdir_size: (\d+)\n$`).FindStringSubmatch(dirs)
	if m == nil {
		t.Fatalf("dirs answers %q", dirs)
	}
	if logSize, _ := strconv.Atoi(m[2]); logSize < 1000 {
		t.Errorf("logdir_size %s, want at least the 1000 bytes written", m[2])
	}
	if dataSize, _ := strconv.Atoi(m[1]); dataSize == 0 {
		t.Errorf("datadir_size 0")
	}
	conf := pairsSep(word("conf"), "=")
	state, log := j.Member.Dirs()
	if conf["dataDir"] != state || conf["dataLogDir"] != log {
		t.Errorf("conf dataDir=%q dataLogDir=%q, the member's are %q and %q", conf["dataDir"], conf["dataLogDir"], state, log)
	}
	for _, k := range []string{"dataDirSize", "dataLogSize"} {
		if n, err := strconv.Atoi(conf[k]); err != nil || n == 0 {
			t.Errorf("conf %s=%q", k, conf[k])
		}
	}
}

func pairsSep(out, sep string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, sep)
		m[k] = v
	}
	return m
}
