package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkClusterWrite measures write throughput of a 3-member ensemble
// (and of one member, for the cost of replication) through each face: 64
// concurrent writers of 256-byte values over 8 connections spread over the
// members, so followers forward to the leader as they would in production.
func BenchmarkClusterWrite(b *testing.B) {
	value := strings.Repeat("v", 256)
	for _, nodes := range []int{1, 3} {
		c := Start(b, Options{Binary: binary, Nodes: nodes})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := c.WaitLeader(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		b.Run(fmt.Sprintf("nodes=%d/face=etcd", nodes), func(b *testing.B) {
			var clis []*clientv3.Client
			for i := range 8 {
				clis = append(clis, etcdClient(b, []string{c.Nodes[i%nodes].EtcdAddr}))
			}
			runWriters(b, 64, func(w, i int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := clis[w%len(clis)].Put(ctx, fmt.Sprintf("/bench/k%d", i%10000), value)
				return err
			})
		})
		b.Run(fmt.Sprintf("nodes=%d/face=zookeeper", nodes), func(b *testing.B) {
			var conns []*zk.Conn
			for i := range 8 {
				conns = append(conns, zkConn(b, []string{c.Nodes[i%nodes].ZKAddr}))
			}
			var seq atomic.Int64
			prefix := fmt.Sprintf("/zbench%d", time.Now().UnixNano())
			if _, err := conns[0].Create(prefix, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				b.Fatal(err)
			}
			runWriters(b, 64, func(w, _ int) error {
				_, err := conns[w%len(conns)].Create(fmt.Sprintf("%s/n%d", prefix, seq.Add(1)), []byte(value), 0, zk.WorldACL(zk.PermAll))
				return err
			})
		})
	}
}

// runWriters runs b.N writes on n goroutines and reports writes/s.
func runWriters(b *testing.B, n int, write func(writer, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := write(w, i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}
