package zkapi_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi"
)

// digestLine is one line of the hash four-letter word: a zxid in
// hexadecimal, a digest as a Java long.
var digestLine = regexp.MustCompile(`^([0-9a-f]+): (-?[0-9]+)$`)

// hashWorkload makes the same 300 writes on addr every time: creates,
// every third node set again, every fifth deleted. No ephemerals: their
// owners (session IDs) differ between servers.
func hashWorkload(t *testing.T, addr string, from, to int) {
	t.Helper()
	c, _ := connect(t, addr, 10*time.Second)
	defer c.Close()
	if from == 0 {
		if _, err := c.Create("/h", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < to; i++ {
		p := fmt.Sprintf("/h/n%03d", i)
		if _, err := c.Create(p, []byte(strings.Repeat("x", i%7)), 0, openACL); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := c.Set(p, []byte("again"), 0); err != nil {
				t.Fatal(err)
			}
		}
		if i%5 == 0 {
			if err := c.Delete(p, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// hashLines asks addr for its digest history and checks each line's
// shape; it returns them in order.
func hashLines(t *testing.T, addr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := testenv.FourLetterWord(ctx, addr, "hash")
	if err != nil {
		t.Fatalf("hash: %v", err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if out == "" {
		lines = nil
	}
	for _, l := range lines {
		if !digestLine.MatchString(l) {
			t.Fatalf("hash line %q is not zxid: digest\n%s", l, out)
		}
	}
	return lines
}

// TestHashMatchesZooKeeper: after the same writes, ZooKeeper 3.8 and Janus
// both answer hash with digest lines of one shape, zxids increasing.
// Digest values are each server's own and are not compared.
func TestHashMatchesZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper")
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	j := startJanus(t, zkapi.Config{FourLetterWhitelist: []string{"hash"}})
	for name, addr := range map[string]string{"zookeeper": ref.Addr, "janus": j.Addr} {
		t.Run(name, func(t *testing.T) {
			hashWorkload(t, addr, 0, 300)
			lines := hashLines(t, addr)
			if len(lines) < 2 {
				t.Fatalf("%d digest lines after the workload's 461 writes, want at least 2: %q", len(lines), lines)
			}
			var last int64 = -1
			for _, l := range lines {
				var zxid int64
				fmt.Sscanf(digestLine.FindStringSubmatch(l)[1], "%x", &zxid)
				if zxid <= last {
					t.Errorf("zxids not increasing: %q", lines)
				}
				last = zxid
			}
		})
	}
}

// TestHashAgreesAcrossMembersAndRestarts: two members given the same
// writes record the same digests, even when one of them restarted half
// way (and so rebuilt its running digest from its stored tree rather than
// from the events): the digest says which tree a member holds, not how it
// got there.
func TestHashAgreesAcrossMembersAndRestarts(t *testing.T) {
	cfg := zkapi.Config{FourLetterWhitelist: []string{"hash"}}
	a := startJanus(t, cfg)
	hashWorkload(t, a.Addr, 0, 300)

	dir := t.TempDir()
	serve := func() (addr string, stop func()) {
		log := testlog.New(t)
		m, err := server.OpenMember(server.MemberConfig{DataDir: dir, Logger: log})
		if err != nil {
			t.Fatalf("open member: %v", err)
		}
		c := cfg
		c.Logger = log
		s := zkapi.New(m, c)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Serve(l) }()
		return l.Addr().String(), func() {
			s.Close()
			<-done
			if err := m.Close(); err != nil {
				t.Errorf("close member: %v", err)
			}
		}
	}
	addr, stop := serve()
	hashWorkload(t, addr, 0, 150)
	before := hashLines(t, addr)
	stop()
	addr, stop = serve()
	defer stop()
	hashWorkload(t, addr, 150, 300)
	after := hashLines(t, addr)

	want := hashLines(t, a.Addr)
	got := append(before, after...)
	if len(before) == 0 || len(after) == 0 {
		t.Fatalf("digests before the restart %q, after %q: want some of each", before, after)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("restarted member's digests:\n%s\nthe other member's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
