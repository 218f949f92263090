package zab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The crash test re-executes the test binary as a child that proposes in a
// loop and prints every acknowledged entry; the parent SIGKILLs it mid-load
// and checks that every acknowledged entry is in the log.
const (
	crashDirEnv   = "JANUS_ZAB_CRASH_CHILD_DIR"
	crashRoundEnv = "JANUS_ZAB_CRASH_CHILD_ROUND"
)

// indexSM is a state machine that holds nothing (so every Open replays
// the whole log) and answers each entry with its index.
type indexSM struct{}

func (indexSM) Apply(entries []Entry) ([]any, error) {
	out := make([]any, len(entries))
	for i, e := range entries {
		out[i] = e.Index
	}
	return out, nil
}
func (indexSM) AppliedIndex() uint64  { return 0 }
func (indexSM) Sync() (uint64, error) { return 0, nil }

// TestCrashChild is the child's body; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestAcknowledgedEntriesSurviveSIGKILL")
	}
	round := os.Getenv(crashRoundEnv)
	m, err := Open(Config{Dir: dir, SegmentSize: 16 << 10}, indexSM{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				payload := fmt.Sprintf("r%s-g%d-%d", round, g, i)
				v, err := m.Propose(context.Background(), []byte(payload))
				if err != nil {
					fmt.Fprintln(os.Stderr, "child propose:", err)
					os.Exit(3)
				}
				line := fmt.Sprintf("ack %d %s\n", v.(uint64), payload)
				out.Lock()
				os.Stdout.WriteString(line) // one write per line, never buffered
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestAcknowledgedEntriesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	var previous []Entry
	for round, killAfter := range []int{50, 400, 1500} {
		acked := runCrashChild(t, dir, round, killAfter)
		if len(acked) < killAfter {
			t.Fatalf("round %d: child acknowledged only %d entries", round, len(acked))
		}
		log := readLog(t, dir)
		// Nothing from earlier rounds went away or changed.
		if len(log) < len(previous) {
			t.Fatalf("round %d: log shrank from %d to %d entries", round, len(previous), len(log))
		}
		for i, e := range previous {
			if log[i].Zxid != e.Zxid || string(log[i].Data) != string(e.Data) {
				t.Fatalf("round %d: entry %d changed from %q to %q", round, e.Index, e.Data, log[i].Data)
			}
		}
		for index, payload := range acked {
			if index == 0 || index > uint64(len(log)) {
				t.Fatalf("round %d: acknowledged index %d (%s) is not in the log of %d entries", round, index, payload, len(log))
			}
			if got := string(log[index-1].Data); got != payload {
				t.Fatalf("round %d: acknowledged index %d holds %q, want %q", round, index, got, payload)
			}
		}
		t.Logf("round %d: %d acknowledged before SIGKILL, %d entries in the log", round, len(acked), len(log))
		previous = log
	}
}

// runCrashChild runs one child until it has acknowledged killAfter
// entries, SIGKILLs it, and returns everything it acknowledged.
func runCrashChild(t *testing.T, dir string, round, killAfter int) map[uint64]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[uint64]string{}
	r := bufio.NewReader(stdout)
	killed := false
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			break // a partial last line was cut by the kill: not an acknowledgment
		}
		if err != nil {
			t.Fatalf("read child output: %v", err)
		}
		var index uint64
		var payload string
		if _, err := fmt.Sscanf(line, "ack %d %s\n", &index, &payload); err != nil {
			continue // test framework output
		}
		if prev, dup := acked[index]; dup {
			t.Fatalf("index %d acknowledged twice (%s, %s)", index, prev, payload)
		}
		acked[index] = payload
		if !killed && len(acked) >= killAfter {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("SIGKILL child: %v", err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child exited before it was killed: %v\n%s", err, stderr.String())
	}
	return acked
}
