package linearize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckLinearizable checks ops against model within timeout and fails t if
// the history is not linearizable, writing porcupine's HTML visualization
// of the failed partition to a file it names in the failure. The file goes
// to $JANUS_LINEARIZE_DIR if set (so it outlives the test), else to
// t.TempDir(). A check that runs out of time is logged, not failed: the
// checker found no violation in the part it explored.
func CheckLinearizable(t testing.TB, name string, model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		t.Logf("%s: %d operations linearizable", name, len(ops))
	case porcupine.Unknown:
		t.Logf("%s: linearizability check of %d operations timed out after %v with no violation found", name, len(ops), timeout)
	case porcupine.Illegal:
		dir := os.Getenv("JANUS_LINEARIZE_DIR")
		if dir == "" {
			dir = t.TempDir()
		}
		path := filepath.Join(dir, sanitize(t.Name()+"-"+name)+".html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("%s: history of %d operations is NOT linearizable (visualization failed: %v)", name, len(ops), err)
		} else {
			t.Errorf("%s: history of %d operations is NOT linearizable; visualization: %s", name, len(ops), path)
		}
	}
	return res
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, s)
}

// CheckRevisionsMonotonic checks that no client ever saw the revision go
// back: each client's successive responses carry non-decreasing header
// revisions, across failovers and restarts too.
func CheckRevisionsMonotonic(revs map[int][]int64) error {
	for client, rs := range revs {
		for i := 1; i < len(rs); i++ {
			if rs[i] < rs[i-1] {
				return fmt.Errorf("client %d: revision went back from %d to %d (response %d)", client, rs[i-1], rs[i], i)
			}
		}
	}
	return nil
}

// CheckNoLostWrites checks that every acknowledged write is in the final
// state. acked maps a key written exactly once to the revision its write
// was acknowledged at (0 if the protocol did not report one); final maps
// each key present at the end to its create (or mod) revision.
func CheckNoLostWrites(acked, final map[string]int64) error {
	var lost, moved []string
	for k, rev := range acked {
		got, ok := final[k]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s@%d", k, rev))
		case rev != 0 && got != rev:
			moved = append(moved, fmt.Sprintf("%s: acknowledged at %d, now at %d", k, rev, got))
		}
	}
	if len(lost) > 0 || len(moved) > 0 {
		return fmt.Errorf("%d of %d acknowledged writes lost %v, %d at another revision %v", len(lost), len(acked), head(lost), len(moved), head(moved))
	}
	return nil
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// LockHold is one acquisition of a lock: its fencing token (for an etcd
// concurrency.Mutex, the create revision of the holder's key) and, on the
// history's clock, when Lock returned and when Unlock was called.
type LockHold struct {
	Client   int
	Token    int64
	Acquired int64
	Released int64
}

// CheckLocks checks the fencing rule: no two acquisitions share a token,
// and a hold that was released before another was acquired has the lower
// token, so a guarded resource that keeps the highest token seen rejects
// every stale holder. (Holds may overlap in time when a holder's lease
// expired under it; fencing is what makes that safe.)
func CheckLocks(holds []LockHold) error {
	byToken := map[int64]LockHold{}
	for _, h := range holds {
		if h.Token <= 0 {
			return fmt.Errorf("client %d held the lock with no fencing token", h.Client)
		}
		if o, dup := byToken[h.Token]; dup {
			return fmt.Errorf("clients %d and %d both held the lock at fencing token %d", o.Client, h.Client, h.Token)
		}
		byToken[h.Token] = h
	}
	for _, a := range holds {
		for _, b := range holds {
			if a.Released < b.Acquired && a.Token > b.Token {
				return fmt.Errorf("client %d acquired after client %d released, with a lower fencing token (%d < %d)", b.Client, a.Client, b.Token, a.Token)
			}
		}
	}
	return nil
}
