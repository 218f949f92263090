package etcdapi

import (
	"fmt"
	"testing"
)

// TestLeaseClientsPrune checks that the addresses of leases that no
// longer exist are dropped once the map reaches its pruning size, so it
// stays bounded by the live leases, and that live ones are kept.
func TestLeaseClientsPrune(t *testing.T) {
	var lc leaseClients
	gone := map[int64]bool{}
	exists := func(ids []int64) map[int64]bool {
		live := map[int64]bool{}
		for _, id := range ids {
			live[id] = !gone[id]
		}
		return live
	}
	for id := int64(1); id < minPrune; id++ {
		lc.add(id, fmt.Sprintf("10.0.0.1:%d", id), exists)
		if id%2 == 0 {
			gone[id] = true // expired since
		}
	}
	if len(lc.addrs) != minPrune-1 {
		t.Fatalf("%d addresses before the pruning size, want %d", len(lc.addrs), minPrune-1)
	}
	lc.add(minPrune, "10.0.0.2:1", exists)
	if want := minPrune/2 + 1; len(lc.addrs) != want {
		t.Errorf("%d addresses after pruning, want %d (the odd leases and the new one)", len(lc.addrs), want)
	}
	if lc.get(3) != "10.0.0.1:3" || lc.get(4) != "" || lc.get(minPrune) != "10.0.0.2:1" {
		t.Errorf("after pruning: lease 3 %q, 4 %q, %d %q", lc.get(3), lc.get(4), minPrune, lc.get(minPrune))
	}
	lc.forget(3)
	if lc.get(3) != "" {
		t.Errorf("a revoked lease keeps its address %q", lc.get(3))
	}
	lc.add(5, "", exists) // an unknown address records nothing
	if lc.get(5) != "10.0.0.1:5" {
		t.Errorf("an empty address replaced lease 5's: %q", lc.get(5))
	}
}
