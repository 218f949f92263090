package linearize

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op builds a known-outcome operation for hand-written histories.
func op(client int, call, ret int64, in, out any) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

func TestEtcdModel(t *testing.T) {
	put := func(k, v string) EtcdInput { return EtcdInput{Op: EtcdPut, Key: k, Value: v} }
	get := func(k string) EtcdInput { return EtcdInput{Op: EtcdGet, Key: k} }
	cas := func(k, exp, v string) EtcdInput { return EtcdInput{Op: EtcdCAS, Key: k, Expect: exp, Value: v} }
	found := func(v string) EtcdOutput { return EtcdOutput{Found: true, Value: v} }
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"sequential put then get", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), EtcdOutput{}), op(1, 2, 3, get("a"), found("1")),
		}, true},
		{"stale read after acknowledged put", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), EtcdOutput{}), op(0, 2, 3, put("a", "2"), EtcdOutput{}), op(1, 4, 5, get("a"), found("1")),
		}, false},
		{"concurrent put may be seen or not", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), EtcdOutput{}), op(1, 1, 2, get("a"), EtcdOutput{}), op(1, 3, 4, get("a"), found("1")),
		}, true},
		{"read goes back to absent", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), EtcdOutput{}), op(1, 1, 2, get("a"), found("1")), op(1, 3, 4, get("a"), EtcdOutput{}),
		}, false},
		{"unknown put may never take effect", []porcupine.Operation{
			op(0, 0, never, put("a", "1"), EtcdOutput{Unknown: true}), op(1, 5, 6, get("a"), EtcdOutput{}),
		}, true},
		{"unknown put may take effect late", []porcupine.Operation{
			op(0, 0, never, put("a", "1"), EtcdOutput{Unknown: true}), op(1, 5, 6, get("a"), EtcdOutput{}), op(1, 7, 8, get("a"), found("1")),
		}, true},
		{"unknown put cannot take effect before its call", []porcupine.Operation{
			op(1, 0, 1, get("a"), found("1")), op(0, 5, never, put("a", "1"), EtcdOutput{Unknown: true}),
		}, false},
		{"two CAS from absent cannot both win", []porcupine.Operation{
			op(0, 0, 10, cas("a", "", "x"), EtcdOutput{Succeeded: true}), op(1, 0, 10, cas("a", "", "y"), EtcdOutput{Succeeded: true}),
		}, false},
		{"CAS chain", []porcupine.Operation{
			op(0, 0, 10, cas("a", "", "x"), EtcdOutput{Succeeded: true}), op(1, 0, 10, cas("a", "", "y"), EtcdOutput{}),
			op(1, 11, 12, cas("a", "x", "y"), EtcdOutput{Succeeded: true}), op(0, 13, 14, get("a"), found("y")),
		}, true},
		{"keys are independent", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), EtcdOutput{}), op(1, 2, 3, get("b"), EtcdOutput{}), op(1, 4, 5, get("a"), found("1")),
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(EtcdModel, tt.ops); got != tt.want {
				t.Fatalf("linearizable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestZKModel(t *testing.T) {
	create := func(p, d string) ZKInput { return ZKInput{Op: ZKCreate, Path: p, Data: d} }
	set := func(p, d string, v int32) ZKInput { return ZKInput{Op: ZKSet, Path: p, Data: d, Version: v} }
	get := func(p string) ZKInput { return ZKInput{Op: ZKGet, Path: p} }
	del := func(p string, v int32) ZKInput { return ZKInput{Op: ZKDelete, Path: p, Version: v} }
	ok := ZKOutput{Result: ZKOK}
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"create set get", []porcupine.Operation{
			op(0, 0, 1, create("/a", "x"), ok), op(0, 2, 3, set("/a", "y", 0), ZKOutput{Version: 1}),
			op(1, 4, 5, get("/a"), ZKOutput{Data: "y", Version: 1}),
		}, true},
		{"set must return the next version", []porcupine.Operation{
			op(0, 0, 1, create("/a", "x"), ok), op(0, 2, 3, set("/a", "y", -1), ZKOutput{Version: 5}),
		}, false},
		{"two creates cannot both succeed", []porcupine.Operation{
			op(0, 0, 5, create("/a", "x"), ok), op(1, 0, 5, create("/a", "y"), ok),
		}, false},
		{"second create sees NodeExists", []porcupine.Operation{
			op(0, 0, 5, create("/a", "x"), ok), op(1, 0, 5, create("/a", "y"), ZKOutput{Result: ZKNodeExists}),
		}, true},
		{"conditional set with a stale version", []porcupine.Operation{
			op(0, 0, 1, create("/a", "x"), ok), op(0, 2, 3, set("/a", "y", 0), ZKOutput{Version: 1}),
			op(1, 4, 5, set("/a", "z", 0), ok),
		}, false},
		{"stale version is refused", []porcupine.Operation{
			op(0, 0, 1, create("/a", "x"), ok), op(0, 2, 3, set("/a", "y", 0), ZKOutput{Version: 1}),
			op(1, 4, 5, set("/a", "z", 0), ZKOutput{Result: ZKBadVersion}),
		}, true},
		{"read of a deleted node", []porcupine.Operation{
			op(0, 0, 1, create("/a", "x"), ok), op(0, 2, 3, del("/a", -1), ok), op(1, 4, 5, get("/a"), ZKOutput{Data: "x"}),
		}, false},
		{"unknown delete may be late", []porcupine.Operation{
			op(0, 0, 1, create("/a", "x"), ok), op(0, 2, never, del("/a", -1), ZKOutput{Result: ZKUnknown}),
			op(1, 4, 5, get("/a"), ZKOutput{Data: "x"}), op(1, 6, 7, get("/a"), ZKOutput{Result: ZKNoNode}),
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(ZKModel, tt.ops); got != tt.want {
				t.Fatalf("linearizable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheckEtcdRevisions(t *testing.T) {
	put := EtcdInput{Op: EtcdPut, Key: "a", Value: "v1"}
	get := EtcdInput{Op: EtcdGet, Key: "a"}
	tests := []struct {
		name    string
		ops     []porcupine.Operation
		wantErr bool
	}{
		{"consistent", []porcupine.Operation{op(0, 0, 1, put, EtcdOutput{Rev: 5}), op(1, 2, 3, get, EtcdOutput{Found: true, Value: "v1", ModRev: 5, Rev: 7})}, false},
		{"read at another revision", []porcupine.Operation{op(0, 0, 1, put, EtcdOutput{Rev: 5}), op(1, 2, 3, get, EtcdOutput{Found: true, Value: "v1", ModRev: 6, Rev: 7})}, true},
		{"mod revision above header", []porcupine.Operation{op(1, 2, 3, get, EtcdOutput{Found: true, Value: "v9", ModRev: 9, Rev: 7})}, true},
		{"value written twice", []porcupine.Operation{op(0, 0, 1, put, EtcdOutput{Rev: 5}), op(0, 2, 3, put, EtcdOutput{Rev: 6})}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckEtcdRevisions(tt.ops); (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestCheckRevisionsMonotonic(t *testing.T) {
	if err := CheckRevisionsMonotonic(map[int][]int64{0: {1, 2, 2, 5}, 1: {3}}); err != nil {
		t.Fatal(err)
	}
	if err := CheckRevisionsMonotonic(map[int][]int64{0: {1, 2}, 1: {3, 4, 2}}); err == nil {
		t.Fatal("a revision going back was not reported")
	}
}

func TestCheckNoLostWrites(t *testing.T) {
	tests := []struct {
		name         string
		acked, final map[string]int64
		wantErr      bool
	}{
		{"all present", map[string]int64{"a": 2, "b": 0}, map[string]int64{"a": 2, "b": 9, "c": 4}, false},
		{"one lost", map[string]int64{"a": 2, "b": 3}, map[string]int64{"a": 2}, true},
		{"rewritten at another revision", map[string]int64{"a": 2}, map[string]int64{"a": 3}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckNoLostWrites(tt.acked, tt.final); (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestCheckWatch(t *testing.T) {
	ev := func(rev int64, key string) WatchEvent { return WatchEvent{Rev: rev, Key: key} }
	ref := []WatchEvent{ev(3, "/p/a"), ev(4, "/p/b"), ev(4, "/p/c"), ev(6, "/p/a"), ev(8, "/p/d")}
	tests := []struct {
		name    string
		got     []WatchEvent
		start   int64
		wantErr bool
	}{
		{"complete", ref, 1, false},
		{"prefix of the history", ref[:3], 1, false},
		{"from a later start", ref[3:], 5, false},
		{"empty", nil, 1, false},
		{"gap", []WatchEvent{ev(3, "/p/a"), ev(6, "/p/a")}, 1, true},
		{"half a revision missing", []WatchEvent{ev(3, "/p/a"), ev(4, "/p/b"), ev(6, "/p/a")}, 1, true},
		{"out of order", []WatchEvent{ev(4, "/p/b"), ev(4, "/p/c"), ev(3, "/p/a")}, 1, true},
		{"duplicate", []WatchEvent{ev(3, "/p/a"), ev(3, "/p/a")}, 1, true},
		{"event never committed", []WatchEvent{ev(3, "/p/a"), ev(4, "/p/b"), ev(4, "/p/c"), ev(5, "/p/x")}, 1, true},
		{"before start", []WatchEvent{ev(3, "/p/a")}, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckWatch(tt.got, tt.start, ref); (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestCheckLocks(t *testing.T) {
	tests := []struct {
		name    string
		holds   []LockHold
		wantErr bool
	}{
		{"sequential, rising tokens", []LockHold{{0, 5, 0, 10}, {1, 7, 11, 20}, {0, 9, 21, 30}}, false},
		{"overlap with rising tokens (expired lease)", []LockHold{{0, 5, 0, 30}, {1, 7, 11, 20}}, false},
		{"same token twice", []LockHold{{0, 5, 0, 10}, {1, 5, 11, 20}}, true},
		{"token goes back", []LockHold{{0, 7, 0, 10}, {1, 5, 11, 20}}, true},
		{"no token", []LockHold{{0, 0, 0, 10}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckLocks(tt.holds); (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestCheckLinearizableWritesVisualization runs the checker on an illegal
// history under a recording TB to see that it fails and names a file.
func TestCheckLinearizableWritesVisualization(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("JANUS_LINEARIZE_DIR", dir)
	rec := &recordingTB{TB: t}
	ops := []porcupine.Operation{
		op(0, 0, 1, EtcdInput{Op: EtcdPut, Key: "a", Value: "1"}, EtcdOutput{}),
		op(1, 2, 3, EtcdInput{Op: EtcdGet, Key: "a"}, EtcdOutput{}),
	}
	if res := CheckLinearizable(rec, "etcd", 7, EtcdModel, ops, 0); res != porcupine.Illegal {
		t.Fatalf("result %v, want Illegal", res)
	}
	if !rec.failed {
		t.Fatal("an illegal history did not fail the test")
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.html")); len(files) != 1 {
		t.Fatalf("visualizations written: %v, want one", files)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("histories saved: %v, want one", files)
	}
	model, loaded, seed, err := LoadHistory(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if seed != 7 || !reflect.DeepEqual(loaded, ops) {
		t.Fatalf("saved history reloads as seed %d, %v; want seed 7, %v", seed, loaded, ops)
	}
	if res := porcupine.CheckOperations(model, loaded); res {
		t.Fatal("the reloaded illegal history checks as linearizable")
	}
}

// TestCheckLinearizableFailsOnTimeout gives the checker a history it cannot
// finish: many concurrent writes of distinct values and a read of a value
// none wrote, so proving it illegal means trying every order of the writes.
// Running out of time must fail the test and save the history, not pass.
func TestCheckLinearizableFailsOnTimeout(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("JANUS_LINEARIZE_DIR", dir)
	var ops []porcupine.Operation
	for i := range 64 {
		ops = append(ops, op(i, 0, 100, EtcdInput{Op: EtcdPut, Key: "a", Value: fmt.Sprint(i)}, EtcdOutput{}))
	}
	ops = append(ops, op(64, 0, 100, EtcdInput{Op: EtcdGet, Key: "a"}, EtcdOutput{Found: true, Value: "none"}))
	rec := &recordingTB{TB: t}
	if res := CheckLinearizable(rec, "etcd", 9, EtcdModel, ops, 100*time.Millisecond); res != porcupine.Unknown {
		t.Fatalf("result %v, want Unknown (a timeout)", res)
	}
	if !rec.failed {
		t.Fatal("a check that timed out did not fail the test")
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 1 {
		t.Fatalf("histories saved: %v, want one", files)
	}
}

// TestZKHistoryRoundTrip saves and reloads a ZooKeeper history.
func TestZKHistoryRoundTrip(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 1, ZKInput{Op: ZKCreate, Path: "/a", Data: "x"}, ZKOutput{Result: ZKOK}),
		op(1, 2, never, ZKInput{Op: ZKSet, Path: "/a", Data: "y", Version: 0}, ZKOutput{Result: ZKUnknown}),
	}
	path := filepath.Join(t.TempDir(), "h.json")
	if err := SaveHistory(path, 3, ops); err != nil {
		t.Fatal(err)
	}
	model, loaded, seed, err := LoadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if seed != 3 || !reflect.DeepEqual(loaded, ops) || model.Init() != ZKModel.Init() {
		t.Fatalf("reloaded as seed %d, %v; want seed 3, %v", seed, loaded, ops)
	}
}

// TestReplayHistory rechecks a history a failed run saved: set
// JANUS_LINEARIZE_REPLAY to the .json file the failure named.
func TestReplayHistory(t *testing.T) {
	path := os.Getenv("JANUS_LINEARIZE_REPLAY")
	if path == "" {
		t.Skip("set JANUS_LINEARIZE_REPLAY to a saved history to recheck it")
	}
	model, ops, seed, err := LoadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replaying %d operations of the run with seed %d", len(ops), seed)
	CheckLinearizable(t, "replay", seed, model, ops, 10*time.Minute)
}

type recordingTB struct {
	testing.TB
	failed bool
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.failed = true
	r.TB.Logf("(expected) "+format, args...)
}
