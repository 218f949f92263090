package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestClusterRollingRestart restarts the members one at a time, as an
// operator upgrading a cluster does (SIGTERM, wait for the exit, start it
// again, wait until it is ready and the ensemble has a leader), followers
// first and the leader last, under the mixed workload. Every member must
// stop promptly; after each restart the workload must make progress of
// every kind; at the end the histories must be linearizable and no
// acknowledged write lost (Results.Check).
func TestClusterRollingRestart(t *testing.T) {
	c := Start(t, Options{Binary: binary, Nodes: 3})
	leader := mustLeader(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	w := Workload{EtcdEndpoints: c.EtcdEndpoints(), ZKServers: c.ZKServers()}
	res := w.Start(ctx, t)
	defer res.Wait()
	defer cancel()

	var order []int
	for i := range c.Nodes {
		if i != leader {
			order = append(order, i)
		}
	}
	order = append(order, leader)
	errc := make(chan error, 1)
	go func() {
		defer cancel()
		for _, i := range order {
			before := res.Acks()
			t.Logf("rolling restart: node %d", c.Nodes[i].ID)
			if err := c.Stop(i, 30*time.Second); err != nil {
				errc <- err
				return
			}
			if err := c.Restart(i); err != nil {
				errc <- err
				return
			}
			if _, err := waitLeader(c); err != nil {
				errc <- fmt.Errorf("after restarting node %d: %w", c.Nodes[i].ID, err)
				return
			}
			pctx, pcancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := res.WaitProgress(pctx, before, 3)
			pcancel()
			if err != nil {
				errc <- fmt.Errorf("after restarting node %d: %w", c.Nodes[i].ID, err)
				return
			}
		}
		errc <- nil
	}()
	res.Wait()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	res.Check(t)
}
