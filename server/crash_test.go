package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The child side of TestAcknowledgedWritesSurviveSIGKILL: it runs a member
// in JANUS_CRASH_DIR and proposes puts from several goroutines, printing
// each acknowledged key with its revision, until it is killed.
func init() {
	dir := os.Getenv("JANUS_CRASH_DIR")
	if dir == "" {
		return
	}
	m, err := OpenMember(MemberConfig{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	// Each round writes keys of its own: a key an earlier round had
	// acknowledged, written again and committed just before this child's
	// kill but never acknowledged, would hold a revision the parent never
	// heard of.
	round := os.Getenv("JANUS_CRASH_ROUND")
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("r%s/w%d/k%06d", round, w, i)
				res, err := m.Propose(context.Background(), putOp(key, strings.Repeat("v", 100), 0))
				if err != nil || res.Err != nil {
					fmt.Fprintln(os.Stderr, "child: propose:", err, res)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(out, "%s %d\n", key, res.Rev)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	select {}
}

func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills child processes")
	}
	dir := t.TempDir()
	acked := map[string]int64{}
	lastRev := int64(0)
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "JANUS_CRASH_DIR="+dir, fmt.Sprintf("JANUS_CRASH_ROUND=%d", round))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		got := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			rev, _ := strconv.ParseInt(f[1], 10, 64)
			acked[f[0]] = rev
			got++
			// Kill mid-load after a varying number of acknowledgements.
			if got == 300+round*200 {
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		cmd.Wait()
		if got < 300 {
			t.Fatalf("round %d: child acknowledged only %d writes before dying", round, got)
		}
		m, err := OpenMember(MemberConfig{DataDir: dir})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		v, err := m.Read(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for key, rev := range acked {
			n, err := v.Node([]byte(key))
			if err != nil || n == nil {
				t.Fatalf("round %d: acknowledged write %s (revision %d) lost after SIGKILL", round, key, rev)
			}
			if n.ModRev != rev {
				t.Fatalf("round %d: %s has revision %d, acknowledged at %d", round, key, n.ModRev, rev)
			}
		}
		rev := v.Rev()
		v.Close()
		if rev < lastRev {
			t.Fatalf("round %d: revision went back from %d to %d", round, lastRev, rev)
		}
		lastRev = rev
		m.Close()
		t.Logf("round %d: %d acknowledged writes all present, revision %d", round, len(acked), rev)
	}
}

func BenchmarkPropose(b *testing.B) {
	for _, proposers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			// The fault is asked at admission (once a proposal), at each
			// turn of the protocol loop that takes proposals and before
			// each group write: above one per proposal, fewer means more
			// proposals were taken together.
			var looks atomic.Int64
			m, err := OpenMember(MemberConfig{DataDir: b.TempDir(), SpaceFault: func() error {
				looks.Add(1)
				return nil
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			value := strings.Repeat("v", 256)
			var wg sync.WaitGroup
			next := make(chan int)
			start := time.Now()
			for range proposers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						res, err := m.Propose(context.Background(), putOp(fmt.Sprintf("key-%d", i%10000), value, 0))
						if err != nil || res.Err != nil {
							b.Error(err, res)
							return
						}
					}
				}()
			}
			for i := 0; i < b.N; i++ {
				next <- i
			}
			close(next)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "proposals/s")
			b.ReportMetric(float64(looks.Load())/float64(b.N), "space-checks/op")
		})
	}
}
