package cluster

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Leader returns the index of the node that leads, as the running nodes
// report it through etcd's Maintenance.Status: a node counts as leader when
// it says so itself. Stopped or dead nodes are skipped.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for i, n := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.EtcdAddr}, DialTimeout: time.Second, Logger: nopLogger()})
		if err != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cli.Status(sctx, n.EtcdAddr)
		cancel()
		cli.Close()
		if err == nil && resp.Leader == n.ID && resp.Header.MemberId == n.ID {
			return i, nil
		}
	}
	return -1, fmt.Errorf("cluster: no node reports itself leader")
}

// WaitLeader waits until some node leads and every running node takes
// writes, and returns the leader's index. A node can name the leader a
// moment before it has finished synchronizing with it (and answers "no
// leader" to writes meanwhile), so the check is a write through each.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		i, err := c.Leader(ctx)
		if err == nil {
			if err = c.allTakeWrites(ctx); err == nil {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("cluster: wait for a leader: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readyKey is written by WaitLeader; workloads never use it.
const readyKey = "/_janus_cluster_ready"

func (c *Cluster) allTakeWrites(ctx context.Context) error {
	for i, n := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.EtcdAddr}, DialTimeout: time.Second, Logger: nopLogger()})
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cli.Put(pctx, readyKey, fmt.Sprint(n.ID))
		cancel()
		cli.Close()
		if err != nil {
			return fmt.Errorf("node %d does not take writes yet: %w", n.ID, err)
		}
	}
	return nil
}
