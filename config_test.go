package main

import (
	"io"
	"strings"
	"testing"
	"time"
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

func TestAuthFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"--auth-token", "simple", "--auth-token-ttl", "1m", "--bcrypt-cost", "4"}, ""},
		{[]string{"--bcrypt-cost", "3"}, "--bcrypt-cost"},
		{[]string{"--bcrypt-cost", "32"}, "--bcrypt-cost"},
		{[]string{"--auth-token", "opaque"}, "unknown --auth-token type"},
		{[]string{"--auth-token", "simple,ttl=1m"}, "no options"},
		{[]string{"--auth-token", "jwt,sign-method=RS256"}, "missing key"},
		{[]string{"--auth-token", "jwt,sign-method=XX"}, "sign-method"},
		{[]string{"--auth-token", "jwt,sign-method=RS256,priv-key=/nonexistent"}, "priv-key"},
		{[]string{"--auth-token", "jwt,sign-method=RS256,colour=blue"}, "unknown jwt option"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}
