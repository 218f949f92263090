package main

import (
	"context"
	"testing"
	"time"
)

func TestWorthReleasing(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                               string
		sinceLook, sinceRelease, lastFreed uint64
		want                               bool
	}{
		{"busy after a burst", 100 * mib, 500 * mib, 0, false},
		{"busy while releases still free memory", 20 * mib, 0, 200 * mib, false},
		{"quiet after a burst", 1 * mib, 500 * mib, 0, true},
		{"quiet, last release freed a lot", 1 * mib, 1 * mib, 64 * mib, true},
		{"quiet, nothing happened since", 0, 2 * mib, 1 * mib, false},
		{"quiet, small work since a release that freed little", 10 * mib, 40 * mib, 4 * mib, false},
	} {
		if got := worthReleasing(tc.sinceLook, tc.sinceRelease, tc.lastFreed); got != tc.want {
			t.Errorf("%s: worthReleasing(%d, %d, %d) = %v, want %v", tc.name, tc.sinceLook, tc.sinceRelease, tc.lastFreed, got, tc.want)
		}
	}
}

// TestReleaseWhenQuietStopsWithItsContext checks the goroutine's way out.
func TestReleaseWhenQuietStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseWhenQuiet(ctx, time.Millisecond)
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("releaseWhenQuiet did not return after its context ended")
	}
}
