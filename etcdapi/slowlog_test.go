package etcdapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// TestSlowRequestIsLoggedInEtcdsShape: a request slower than 100 ms is
// logged once with etcd's message and fields, and without its value.
func TestSlowRequestIsLoggedInEtcdsShape(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil))}
	slow := func(ctx context.Context, req any) (any, error) {
		time.Sleep(expectedRequestDuration + 50*time.Millisecond) // longer than the threshold, whatever the machine's load
		return &pb.PutResponse{Header: &pb.ResponseHeader{Revision: 9}}, nil
	}
	req := &pb.PutRequest{Key: []byte("/registry/pods/x"), Value: []byte("secret value")}
	if _, err := s.slowRequests(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: "/etcdserverpb.KV/Put"}, slow); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(lines), logs.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["msg"] != "apply request took too long" || rec["level"] != "WARN" || rec["expected-duration"] != "100ms" || rec["took"] == nil {
		t.Errorf("log record %v", rec)
	}
	if r, _ := rec["request"].(string); !strings.Contains(r, "/registry/pods/x") || strings.Contains(lines[0], "secret value") {
		t.Errorf("request field %q: want the key, never the value", r)
	}
}
