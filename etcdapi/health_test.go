package etcdapi_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
)

// TestGRPCHealthWatchSeesTheMemberStop watches grpc.health.v1 for the
// whole server ("") and stops the member the way a failing disk would:
// the watcher must be told NOT_SERVING.
func TestGRPCHealthWatchSeesTheMemberStop(t *testing.T) {
	var armed atomic.Bool
	j := startJanus(t, func(m *server.MemberConfig, a *etcdapi.Config) {
		// The member logs its stop at ERROR, on purpose here.
		m.Logger = testlog.New(t, testlog.ExpectErrors())
		a.Logger = m.Logger
		m.ApplyFault = func(uint64) error {
			if armed.Load() {
				return errors.New("injected I/O failure")
			}
			return nil
		}
	})
	conn, err := grpc.NewClient(strings.TrimPrefix(j.Endpoint, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := testCtx(t)
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first health status %v %v, want SERVING", r, err)
	}
	armed.Store(true)
	if _, err := j.Client.Put(ctx, "k", "v"); err == nil {
		t.Fatal("a put succeeded through a failing apply")
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health status after the stop %v %v, want NOT_SERVING", r, err)
	}
}

// TestGatewayRefusesOversizedBodies checks the JSON gateway answers what
// etcd v3.7.3's does (measured with --max-request-bytes=1024): etcd's own
// error for a request over the limit, gRPC's for a message over the limit
// plus its overhead, and the same gRPC error, before reading it, for a
// body too large to be read at all.
func TestGatewayRefusesOversizedBodies(t *testing.T) {
	j := startJanus(t, func(_ *server.MemberConfig, c *etcdapi.Config) { c.MaxRequestBytes = 1024 })
	bodyOf := func(valueLen int) []byte {
		body, _ := json.Marshal(map[string]string{
			"key":   base64.StdEncoding.EncodeToString([]byte("k")),
			"value": base64.StdEncoding.EncodeToString([]byte(strings.Repeat("v", valueLen))),
		})
		return body
	}
	// put returns the status and the error's code and message: protojson
	// varies its spacing on purpose, so bodies are compared decoded.
	put := func(valueLen int, chunked bool) (int, string) {
		t.Helper()
		body := bodyOf(valueLen)
		var r io.Reader = strings.NewReader(string(body))
		if chunked {
			r = io.MultiReader(r) // hides the length: sent chunked
		}
		req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, j.Gateway+"/v3/kv/put", r)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(out, &e) != nil || e.Code == 0 {
			return resp.StatusCode, string(out)
		}
		return resp.StatusCode, fmt.Sprintf("%d %s", e.Code, e.Message)
	}
	for _, tc := range []struct {
		valueLen int
		chunked  bool
		code     int
		body     string
	}{
		{2000, false, 400, "3 etcdserver: request is too large"},
		{600 << 10, false, 429, "8 grpc: received message larger than max (614407 vs. 525312)"},
		{3 << 20, false, 429, fmt.Sprintf("8 grpc: received message larger than max (%d vs. 1050624)", len(bodyOf(3<<20)))},
	} {
		code, body := put(tc.valueLen, tc.chunked)
		if code != tc.code || body != tc.body {
			t.Errorf("put of a %d-byte value: %d %s, want %d %s", tc.valueLen, code, body, tc.code, tc.body)
		}
	}
	// Without a declared length the body is cut off at the limit.
	if code, body := put(3<<20, true); code < 400 {
		t.Errorf("chunked put of 3 MiB: %d %s, want it refused", code, body)
	}
	if code, body := put(10, false); code != 200 {
		t.Errorf("a small put after the refusals: %d %s", code, body)
	}
}
