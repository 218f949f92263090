package etcdapi

import (
	"context"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// leaseClients remembers the address of the client that granted each
// lease through this member, for the web console. It is this member's
// memory only, not replicated state: a lease granted elsewhere, or before
// a restart, has no address here.
type leaseClients struct {
	mu    sync.Mutex
	addrs map[int64]string
	// pruneAt is the size at which the next grant drops the addresses of
	// leases that no longer exist (expired or revoked elsewhere), so the
	// map stays within twice the live leases granted here.
	pruneAt int
}

// minPrune is the smallest map that is pruned.
const minPrune = 1024

// grantAddr is the address of the client making the request in ctx: its
// connection's peer, or for a request relayed by the JSON gateway (an
// in-process connection) the HTTP client's IP, which the gateway appends
// to x-forwarded-for. "" when neither is known.
func grantAddr(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if p.Addr.Network() != "bufconn" {
		return p.Addr.String()
	}
	// Only the gateway reaches the in-process connection, and it sets
	// the last x-forwarded-for entry from the request's RemoteAddr.
	md, _ := metadata.FromIncomingContext(ctx)
	fwd := md.Get("x-forwarded-for")
	if len(fwd) == 0 {
		return ""
	}
	parts := strings.Split(fwd[len(fwd)-1], ",")
	ip := strings.TrimSpace(parts[len(parts)-1])
	if net.ParseIP(ip) == nil {
		return ""
	}
	return ip + " (JSON gateway)"
}

// add records addr for lease id; exists reports whether a lease still
// exists, for pruning.
func (lc *leaseClients) add(id int64, addr string, exists func(ids []int64) map[int64]bool) {
	if addr == "" {
		return
	}
	lc.mu.Lock()
	if lc.addrs == nil {
		lc.addrs = map[int64]string{}
	}
	lc.addrs[id] = addr
	if len(lc.addrs) < max(lc.pruneAt, minPrune) {
		lc.mu.Unlock()
		return
	}
	ids := make([]int64, 0, len(lc.addrs))
	for k := range lc.addrs {
		ids = append(ids, k)
	}
	lc.pruneAt = 2 * len(ids) // no second prune while this one runs
	lc.mu.Unlock()

	live := exists(ids)
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, k := range ids {
		if !live[k] && k != id {
			delete(lc.addrs, k)
		}
	}
	lc.pruneAt = 2 * len(lc.addrs)
}

func (lc *leaseClients) forget(id int64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	delete(lc.addrs, id)
}

func (lc *leaseClients) get(id int64) string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.addrs[id]
}

// LeaseClient returns the address of the client that granted lease id
// through this member, "" if it was granted elsewhere or before this
// process started. The web console shows it.
func (s *Server) LeaseClient(id int64) string { return s.leaseClients.get(id) }

// leasesExisting reports which of ids are leases in the latest applied
// state; on a failed read it keeps them all.
func (s *Server) leasesExisting(ids []int64) map[int64]bool {
	live := make(map[int64]bool, len(ids))
	v, err := s.b.Read(s.ctx, 0)
	if err != nil {
		for _, id := range ids {
			live[id] = true
		}
		return live
	}
	defer v.Close()
	for _, id := range ids {
		l, err := v.Lease(id)
		live[id] = err != nil || l != nil
	}
	return live
}
