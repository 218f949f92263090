package etcdapi

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthServer is grpc.health.v1.Health on the etcd port, registered as
// etcd registers it, with one status for the whole server (service "").
// etcd sets it SERVING once and leaves it (it exits rather than serve
// badly); here it follows the member: NOT_SERVING while the member has
// stopped, knows no leader or has an alarm raised.
type healthServer struct {
	*health.Server
	s  *Server
	mu sync.Mutex // one refresh at a time, so a change is logged once
}

// healthPollEvery is how often Watch callers learn of a change; Check
// looks at the member itself.
const healthPollEvery = time.Second

func newHealthServer(s *Server) *healthServer {
	h := &healthServer{Server: health.NewServer(), s: s}
	h.refresh()
	return h
}

// Check answers from the member's current state.
func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.refresh()
	return h.Server.Check(ctx, req)
}

// follow refreshes the status until ctx ends, then marks every service
// NOT_SERVING, as a server going away should.
func (h *healthServer) follow(ctx context.Context) {
	t := time.NewTicker(healthPollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.Shutdown()
			return
		case <-t.C:
			h.refresh()
		}
	}
}

// refresh sets the overall status from the member's, logging a change.
func (h *healthServer) refresh() {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.s.b.Status()
	want := healthpb.HealthCheckResponse_NOT_SERVING
	if st.Serving() {
		want = healthpb.HealthCheckResponse_SERVING
	}
	resp, err := h.Server.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err == nil && resp.Status == want {
		return
	}
	if want == healthpb.HealthCheckResponse_SERVING {
		h.s.log.Info("grpc service status changed", "status", want.String())
	} else {
		h.s.log.Warn("grpc service status changed", "status", want.String(),
			"leader", st.LeaderID, "alarms", st.Alarms, "stopped", st.Err)
	}
	h.SetServingStatus("", want)
}
