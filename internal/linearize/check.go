package linearize

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckLinearizable checks ops against model within timeout and fails t
// unless the history is proven linearizable. A check that runs out of time
// fails too: a history too big to check proves nothing, so the workload
// must keep histories small (many keys, few operations per key). On
// failure it saves the history as JSON, with the seed of the run that made
// it, for ReplayHistory, and for an illegal history porcupine's HTML
// visualization of the failed partition; the failure names both files. The
// files go to $JANUS_LINEARIZE_DIR if set, else to a new directory under
// the system temp dir that is kept after the test.
func CheckLinearizable(t testing.TB, name string, seed uint64, model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if res == porcupine.Ok {
		t.Logf("%s: %d operations linearizable", name, len(ops))
		return res
	}
	dir, err := failureDir()
	if err != nil {
		t.Errorf("%s: linearizability check of %d operations (seed %d) ended %v; saving the history failed: %v", name, len(ops), seed, res, err)
		return res
	}
	base := filepath.Join(dir, sanitize(t.Name()+"-"+name))
	saved := base + ".json"
	if err := SaveHistory(saved, seed, ops); err != nil {
		saved = fmt.Sprintf("(not saved: %v)", err)
	}
	if res == porcupine.Unknown {
		t.Errorf("%s: linearizability check of %d operations (seed %d) timed out after %v: nothing is proven; history: %s", name, len(ops), seed, timeout, saved)
		return res
	}
	html := base + ".html"
	if err := porcupine.VisualizePath(model, info, html); err != nil {
		html = fmt.Sprintf("(visualization failed: %v)", err)
	}
	t.Errorf("%s: history of %d operations (seed %d) is NOT linearizable; history: %s; visualization: %s", name, len(ops), seed, saved, html)
	return res
}

// failureDir is where a failed check's files go: $JANUS_LINEARIZE_DIR, or
// a fresh directory that outlives the test.
func failureDir() (string, error) {
	if dir := os.Getenv("JANUS_LINEARIZE_DIR"); dir != "" {
		return dir, os.MkdirAll(dir, 0o755)
	}
	return os.MkdirTemp("", "janus-linearize-")
}

// savedHistory is a history as SaveHistory writes it. Model names which
// model's types Inputs and Outputs hold.
type savedHistory struct {
	Seed  uint64
	Model string
	Ops   []savedOp
}

type savedOp struct {
	ClientId     int
	Call, Return int64
	Input        json.RawMessage
	Output       json.RawMessage
}

// SaveHistory writes ops (of EtcdModel or ZKModel) and the seed of the run
// that recorded them to path as JSON.
func SaveHistory(path string, seed uint64, ops []porcupine.Operation) error {
	h := savedHistory{Seed: seed}
	for _, op := range ops {
		switch op.Input.(type) {
		case EtcdInput:
			h.Model = "etcd"
		case ZKInput:
			h.Model = "zookeeper"
		default:
			return fmt.Errorf("linearize: save history: input of type %T", op.Input)
		}
		in, err := json.Marshal(op.Input)
		if err != nil {
			return fmt.Errorf("linearize: save history: %w", err)
		}
		out, err := json.Marshal(op.Output)
		if err != nil {
			return fmt.Errorf("linearize: save history: %w", err)
		}
		h.Ops = append(h.Ops, savedOp{ClientId: op.ClientId, Call: op.Call, Return: op.Return, Input: in, Output: out})
	}
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("linearize: save history: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}

// LoadHistory reads a history SaveHistory wrote and returns its model, its
// operations and the seed of the run that recorded it.
func LoadHistory(path string) (porcupine.Model, []porcupine.Operation, uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return porcupine.Model{}, nil, 0, fmt.Errorf("linearize: load history: %w", err)
	}
	var h savedHistory
	if err := json.Unmarshal(b, &h); err != nil {
		return porcupine.Model{}, nil, 0, fmt.Errorf("linearize: load history %s: %w", path, err)
	}
	model, decode := EtcdModel, decodeOp[EtcdInput, EtcdOutput]
	if h.Model == "zookeeper" {
		model, decode = ZKModel, decodeOp[ZKInput, ZKOutput]
	}
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for i, op := range h.Ops {
		in, out, err := decode(op)
		if err != nil {
			return porcupine.Model{}, nil, 0, fmt.Errorf("linearize: load history %s: operation %d: %w", path, i, err)
		}
		ops = append(ops, porcupine.Operation{ClientId: op.ClientId, Call: op.Call, Return: op.Return, Input: in, Output: out})
	}
	return model, ops, h.Seed, nil
}

// decodeOp decodes a saved operation's input and output as an I and an O.
func decodeOp[I, O any](op savedOp) (any, any, error) {
	var in I
	var out O
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(op.Output, &out); err != nil {
		return nil, nil, err
	}
	return in, out, nil
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
