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
