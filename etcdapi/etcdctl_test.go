package etcdapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/januskv/janus/internal/testenv"
)

// TestEtcdctl drives the real etcdctl v3.7.3 against Janus.
func TestEtcdctl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcdctl")
	}
	bin := testenv.EtcdctlPath(t)
	j := startJanus(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(testCtx(t), bin, append([]string{"--endpoints", j.Endpoint, "--command-timeout", "30s"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("etcdctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	expect := func(out, want string) {
		t.Helper()
		if !strings.Contains(out, want) {
			t.Fatalf("output %q does not contain %q", out, want)
		}
	}
	expect(run("put", "foo", "bar"), "OK")
	expect(run("put", "foo/x", "1"), "OK")
	expect(run("get", "foo"), "foo\nbar\n")
	expect(run("get", "foo", "--prefix", "--keys-only"), "foo\n\nfoo/x\n")
	expect(run("get", "foo", "--rev", "2"), "bar")
	expect(run("get", "foo", "-w", "json"), `"count":1`)
	expect(run("del", "foo/x"), "1")
	lease := strings.Fields(run("lease", "grant", "60"))[1] // "lease <id> granted with TTL(60s)"
	expect(run("put", "leased", "v", "--lease", lease), "OK")
	expect(run("lease", "timetolive", lease, "--keys"), "attached keys([leased])")
	expect(run("lease", "list"), lease)
	expect(run("lease", "revoke", lease), "revoked")
	expect(run("endpoint", "health"), "is healthy")
	status := run("endpoint", "status", "-w", "json")
	expect(status, `"version":"3.7.3"`)
	expect(run("endpoint", "hashkv"), j.Endpoint)
	expect(run("member", "list"), "started")
	expect(run("compaction", "3"), "compacted revision 3")
	expect(run("defrag"), "Finished defragmenting")
	run("alarm", "list")
}

// TestGateway speaks etcd's JSON gateway as curl users do.
func TestGateway(t *testing.T) {
	j := startJanus(t)
	post := func(path, body string) map[string]any {
		t.Helper()
		resp, err := http.Post(j.Gateway+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s: %s", path, resp.Status, data)
		}
		var out map[string]any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, data)
		}
		return out
	}
	// Keys and values are base64 in etcd's JSON: "foo" is Zm9v, "bar" YmFy.
	post("/v3/kv/put", `{"key":"Zm9v","value":"YmFy"}`)
	got := post("/v3/kv/range", `{"key":"Zm9v"}`)
	kvs, _ := got["kvs"].([]any)
	if len(kvs) != 1 || kvs[0].(map[string]any)["value"] != "YmFy" || got["count"] != "1" {
		t.Fatalf("range = %v", got)
	}
	grant := post("/v3/lease/grant", `{"TTL":30}`)
	if grant["ID"] == nil || grant["TTL"] != "30" {
		t.Fatalf("lease grant = %v", grant)
	}
	st := post("/v3/maintenance/status", `{}`)
	if st["version"] != "3.7.3" {
		t.Fatalf("status = %v", st)
	}
}

// TestMemberListShapeAgainstEtcd compares `etcdctl member list` on a
// single member with a real etcd's: the same fields, a status of started,
// not a learner, and a peer URL (etcd always lists one; a single Janus
// with no peer address shows etcd's default, http://localhost:2380).
func TestMemberListShapeAgainstEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real etcd")
	}
	bin := testenv.EtcdctlPath(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t)
	var shapes [2]string
	for i, ep := range []string{ref.Endpoints[0], j.Endpoint} {
		out, err := exec.CommandContext(testCtx(t), bin, "--endpoints", ep, "member", "list").CombinedOutput()
		if err != nil {
			t.Fatalf("etcdctl member list at %s: %v\n%s", ep, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 {
			t.Fatalf("member list at %s: %q, want one member", ep, out)
		}
		f := strings.Split(lines[0], ", ")
		if len(f) != 6 {
			t.Fatalf("member list at %s: %q, want 6 fields", ep, lines[0])
		}
		for k, field := range f {
			if (k == 3 || k == 4) && !strings.HasPrefix(field, "http://") {
				t.Errorf("member list at %s: field %d is %q, want a URL", ep, k+1, field)
			}
		}
		if i == 1 && f[3] != "http://localhost:2380" {
			t.Errorf("single Janus lists peer URL %q, want etcd's default http://localhost:2380", f[3])
		}
		shapes[i] = f[1] + ", " + f[5] // status, is learner
	}
	if shapes[0] != shapes[1] {
		t.Errorf("member list: etcd %q, janus %q", shapes[0], shapes[1])
	}
}
