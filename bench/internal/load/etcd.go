package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/januskv/janus/bench/internal/hist"
)

// EtcdWorkloads names the workloads NewEtcd knows, with what one operation
// is.
var EtcdWorkloads = map[string]string{
	"put":       "Put of a random key in the key space",
	"put-seq":   "Put of key number seq: every key written once (loading)",
	"range":     "linearizable Get of one random preloaded key",
	"range-ser": "serializable Get of one random preloaded key",
	"txn":       "Txn: if mod_revision(key) > -1 then put(key) else get(key)",
	"watch":     "Put of one key watched by --watchers watchers; events are measured from a timestamp in the value",
	"lease":     "LeaseGrant, then Put attached to the lease, then LeaseRevoke",
	"mixed":     "linearizable Get with probability --read-ratio, else Put",
}

// etcdLoad is a workload over the etcd v3 API.
type etcdLoad struct {
	name    string
	opts    Options
	clients []*clientv3.Client

	// watch fan-out only
	watchKey    string
	watchCancel context.CancelFunc
	watchWG     sync.WaitGroup
	events      atomic.Int64
	shards      []*lockedHist
}

type lockedHist struct {
	mu sync.Mutex
	h  *hist.Histogram
}

// NewEtcd connects opts.Conns clients to endpoints and prepares workload
// name: preloading the key space for reads, starting the watchers for
// watch fan-out.
func NewEtcd(ctx context.Context, name string, endpoints []string, opts Options) (Workload, error) {
	opts = opts.withDefaults()
	if _, ok := EtcdWorkloads[name]; !ok {
		return nil, fmt.Errorf("etcd workload %q: %w", name, ErrUnknownWorkload)
	}
	l := &etcdLoad{name: name, opts: opts}
	for range opts.Conns {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: 10 * time.Second,
			Context:     context.WithoutCancel(ctx),
			Logger:      zap.NewNop(),
			// The etcd default; raised for large --value-size runs.
			MaxCallSendMsgSize: 16 << 20,
		})
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
		}
		l.clients = append(l.clients, c)
	}
	// Fail early, with a clear message, if nobody answers.
	probeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := l.clients[0].Get(probeCtx, "health")
	cancel()
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("etcd %v does not answer: %w", endpoints, err)
	}
	switch name {
	case "range", "range-ser", "mixed":
		if err := l.preload(ctx); err != nil {
			l.Close()
			return nil, err
		}
	case "watch":
		if err := l.startWatchers(ctx); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *etcdLoad) key(i int64) string { return l.opts.Prefix + "/" + keyName(i, l.opts.KeySize) }

func (l *etcdLoad) preload(ctx context.Context) error {
	val := value(l.opts.ValueSize, workerRand(-1))
	err := parallel(ctx, int64(l.opts.KeySpace), 4*len(l.clients), func(ctx context.Context, w int, i int64) error {
		_, err := l.clients[w%len(l.clients)].Put(ctx, l.key(i), string(val))
		return err
	})
	if err != nil {
		return fmt.Errorf("preload %d keys: %w", l.opts.KeySpace, err)
	}
	return nil
}

func (l *etcdLoad) startWatchers(ctx context.Context) error {
	l.watchKey = l.opts.Prefix + "/watched"
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.watchCancel = cancel
	l.shards = make([]*lockedHist, len(l.clients))
	for i := range l.shards {
		l.shards[i] = &lockedHist{h: hist.New()}
	}
	created := make(chan error, l.opts.Watchers)
	for i := range l.opts.Watchers {
		c := l.clients[i%len(l.clients)]
		shard := l.shards[i%len(l.shards)]
		// One gRPC watch stream per client: clientv3 multiplexes every
		// watch with the same context onto one stream.
		wch := c.Watch(wctx, l.watchKey, clientv3.WithCreatedNotify())
		l.watchWG.Add(1)
		go func() {
			defer l.watchWG.Done()
			first := true
			for resp := range wch {
				if first {
					first = false
					if !resp.Created {
						created <- fmt.Errorf("watch not created: %v", resp.Err())
						return
					}
					created <- nil
				}
				if len(resp.Events) == 0 {
					continue
				}
				now := time.Now()
				shard.mu.Lock()
				for _, ev := range resp.Events {
					if ts, ok := stampOf(ev.Kv.Value); ok {
						shard.h.Record(now.Sub(ts))
					}
				}
				shard.mu.Unlock()
				l.events.Add(int64(len(resp.Events)))
			}
			if first {
				created <- errors.New("watch channel closed before creation")
			}
		}()
	}
	for range l.opts.Watchers {
		select {
		case err := <-created:
			if err != nil {
				return fmt.Errorf("start %d watchers: %w", l.opts.Watchers, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("start %d watchers: %w", l.opts.Watchers, ctx.Err())
		}
	}
	return nil
}

func (l *etcdLoad) watches() bool { return l.name == "watch" }

func (l *etcdLoad) Drain(ctx context.Context, ops int64) (*hist.Histogram, int64, int64) {
	expected := ops * int64(l.opts.Watchers)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for l.events.Load() < expected && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	all := hist.New()
	for _, s := range l.shards {
		s.mu.Lock()
		all.Merge(s.h)
		s.mu.Unlock()
	}
	return all, l.events.Load(), expected
}

func (l *etcdLoad) Worker(i int) Worker {
	c := l.clients[i%len(l.clients)]
	r := workerRand(i)
	val := string(value(l.opts.ValueSize, r))
	randKey := func() string { return l.key(r.Int64N(int64(l.opts.KeySpace))) }
	switch l.name {
	case "put":
		return func(ctx context.Context, _ int64) error {
			_, err := c.Put(ctx, randKey(), val)
			return err
		}
	case "put-seq":
		return func(ctx context.Context, seq int64) error {
			_, err := c.Put(ctx, l.key(seq), val)
			return err
		}
	case "range":
		return func(ctx context.Context, _ int64) error { return getOne(ctx, c, randKey()) }
	case "range-ser":
		return func(ctx context.Context, _ int64) error {
			return getOne(ctx, c, randKey(), clientv3.WithSerializable())
		}
	case "txn":
		return func(ctx context.Context, _ int64) error {
			k := randKey()
			_, err := c.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(k), ">", -1)).
				Then(clientv3.OpPut(k, val)).
				Else(clientv3.OpGet(k)).
				Commit()
			return err
		}
	case "watch":
		pad := []byte(val[:max(0, len(val)-8)])
		return func(ctx context.Context, _ int64) error {
			_, err := c.Put(ctx, l.watchKey, string(stampValue(pad)))
			return err
		}
	case "lease":
		return func(ctx context.Context, _ int64) error {
			g, err := c.Grant(ctx, 60)
			if err != nil {
				return fmt.Errorf("grant: %w", err)
			}
			if _, err := c.Put(ctx, randKey(), val, clientv3.WithLease(g.ID)); err != nil {
				return fmt.Errorf("put with lease: %w", err)
			}
			if _, err := c.Revoke(ctx, g.ID); err != nil {
				return fmt.Errorf("revoke: %w", err)
			}
			return nil
		}
	case "mixed":
		return mixedEtcd(c, r, l.opts.ReadRatio, randKey, val)
	}
	panic("unreachable: workload validated in NewEtcd")
}

func mixedEtcd(c *clientv3.Client, r *rand.Rand, readRatio float64, randKey func() string, val string) Worker {
	return func(ctx context.Context, _ int64) error {
		if r.Float64() < readRatio {
			return getOne(ctx, c, randKey())
		}
		_, err := c.Put(ctx, randKey(), val)
		return err
	}
}

func getOne(ctx context.Context, c *clientv3.Client, key string, opts ...clientv3.OpOption) error {
	resp, err := c.Get(ctx, key, opts...)
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 {
		return fmt.Errorf("get %s: %d keys, want 1 (preloaded)", key, len(resp.Kvs))
	}
	return nil
}

func (l *etcdLoad) Close() error {
	if l.watchCancel != nil {
		l.watchCancel()
	}
	var errs []error
	for _, c := range l.clients {
		if err := c.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	l.watchWG.Wait()
	return errors.Join(errs...)
}
