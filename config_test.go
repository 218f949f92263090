package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/server"
)

func TestEnsembleFlags(t *testing.T) {
	three := "1=127.0.0.1:2888,2=127.0.0.1:2889,3=127.0.0.1:2890"
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		{"single member", nil, ""},
		{"three voters", []string{"--id", "2", "--peers", three}, ""},
		{"observer", []string{"--id", "4", "--peers", three, "--observers", "4=127.0.0.1:2891"}, ""},
		{"client addresses", []string{"--id", "1", "--peers", three, "--peer-etcd", "1=127.0.0.1:2379,2=127.0.0.1:2380", "--peer-zk", "3=127.0.0.1:2181"}, ""},
		{"id not in the ensemble", []string{"--id", "9", "--peers", three}, "neither"},
		{"voter and observer", []string{"--id", "1", "--peers", three, "--observers", "3=127.0.0.1:2891"}, "both"},
		{"observers without voters", []string{"--observers", "1=127.0.0.1:2891"}, "needs --peers"},
		{"client address of a stranger", []string{"--id", "1", "--peers", three, "--peer-etcd", "7=127.0.0.1:2379"}, "member 7"},
		{"duplicate id", []string{"--id", "1", "--peers", "1=a:1,1=a:2"}, "twice"},
		{"heartbeat not below election timeout", []string{"--heartbeat-interval", "2s", "--election-timeout", "1s"}, "heartbeat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v (config %+v), want an error mentioning %q", err, cfg, tt.wantErr)
			}
		})
	}
}

func TestCorruptCheckFlags(t *testing.T) {
	tests := []struct {
		args     []string
		interval time.Duration
		initial  bool
		wantErr  string
	}{
		{nil, 5 * time.Minute, true, ""},
		{[]string{"--corrupt-check-time", "0", "--initial-corrupt-check=false"}, 0, false, ""},
		// etcd's older, experimental names are accepted too.
		{[]string{"--experimental-corrupt-check-time", "30s", "--experimental-initial-corrupt-check=false"}, 30 * time.Second, false, ""},
		{[]string{"--corrupt-check-time", "-1s"}, 0, false, "negative"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CorruptCheckTime != tt.interval || cfg.InitialCorruptCheck != tt.initial {
				t.Fatalf("interval %v initial %v, want %v %v", cfg.CorruptCheckTime, cfg.InitialCorruptCheck, tt.interval, tt.initial)
			}
		})
	}
}

func TestSpaceFlags(t *testing.T) {
	tests := []struct {
		args    []string
		quota   int64
		compact server.AutoCompaction
		wantErr string
	}{
		// Janus keeps an hour of history unless told otherwise.
		{nil, 0, server.AutoCompaction{Mode: "periodic", Period: time.Hour}, ""},
		{[]string{"--quota-backend-bytes", "-1", "--auto-compaction-retention", "0"}, -1, server.AutoCompaction{}, ""},
		{[]string{"--quota-backend-bytes", "8589934592", "--auto-compaction-mode", "revision", "--auto-compaction-retention", "10000"}, 8 << 30, server.AutoCompaction{Mode: "revision", Revisions: 10000}, ""},
		{[]string{"--auto-compaction-retention", "2"}, 0, server.AutoCompaction{Mode: "periodic", Period: 2 * time.Hour}, ""},
		{[]string{"--auto-compaction-mode", "revision", "--auto-compaction-retention", "1h"}, 0, server.AutoCompaction{}, "number of revisions"},
		{[]string{"--auto-compaction-mode", "hourly"}, 0, server.AutoCompaction{}, "neither periodic nor revision"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.QuotaBackendBytes != tt.quota || cfg.AutoCompaction != tt.compact {
				t.Fatalf("quota %d, compaction %+v; want %d, %+v", cfg.QuotaBackendBytes, cfg.AutoCompaction, tt.quota, tt.compact)
			}
		})
	}
}
