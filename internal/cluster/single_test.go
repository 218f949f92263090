package cluster

import (
	"context"
	"testing"
	"time"
)

// TestSingleNodeSIGKILL runs the two-face workload against one Janus
// process that is killed with SIGKILL and restarted twice under load: the
// histories must be linearizable, no acknowledged write may be lost, and
// watches and locks must keep their guarantees across the restarts.
func TestSingleNodeSIGKILL(t *testing.T) {
	c := Start(t, Options{Binary: binary, Nodes: 1})
	ctx, cancel := context.WithCancel(context.Background())
	w := Workload{EtcdEndpoints: c.EtcdEndpoints(), ZKServers: c.ZKServers()}
	res := w.Start(ctx, t)
	defer res.Wait()
	defer cancel()
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		defer cancel()
		for range 2 {
			pause(ctx, 1500*time.Millisecond)
			c.Kill(0)
			pause(context.Background(), 200*time.Millisecond)
			c.Restart(0)
		}
		pause(context.Background(), 1500*time.Millisecond)
	}()
	res.Wait()
	<-faults
	res.Check(t)
}
