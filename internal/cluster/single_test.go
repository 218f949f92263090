package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSingleNodeSIGKILL runs the two-face workload against one Janus
// process that is killed with SIGKILL and restarted twice under load:
// after each restart the workload must make progress of every kind, the
// histories must be linearizable, no acknowledged write may be lost, and
// watches and locks must keep their guarantees across the restarts.
func TestSingleNodeSIGKILL(t *testing.T) {
	c := Start(t, Options{Binary: binary, Nodes: 1})
	ctx, cancel := context.WithCancel(context.Background())
	w := Workload{EtcdEndpoints: c.EtcdEndpoints(), ZKServers: c.ZKServers()}
	res := w.Start(ctx, t)
	defer res.Wait()
	defer cancel()
	faultErr := make(chan error, 1)
	go func() {
		defer cancel()
		for round := range 2 {
			pause(ctx, 1500*time.Millisecond)
			c.Kill(0)
			before := res.Acks()
			pause(context.Background(), 200*time.Millisecond)
			if err := c.Restart(0); err != nil {
				faultErr <- err
				return
			}
			pctx, pcancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := res.WaitProgress(pctx, before, minPerFault)
			pcancel()
			if err != nil {
				faultErr <- fmt.Errorf("after restart %d: %w", round, err)
				return
			}
		}
		faultErr <- nil
	}()
	res.Wait()
	if err := <-faultErr; err != nil {
		t.Fatal(err)
	}
	res.Check(t)
}
