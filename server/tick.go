package server

import (
	"context"
	"time"
)

// runEvery calls fn every interval until ctx ends: the loop of the
// member's periodic duties (lease expiry, reaping, corruption checks, value
// log reclaim).
func runEvery(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}
