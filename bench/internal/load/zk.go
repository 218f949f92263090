package load

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/bench/internal/hist"
)

// ZKWorkloads names the workloads NewZK knows, with what one operation is.
var ZKWorkloads = map[string]string{
	"create":      "create of a new persistent znode",
	"setData":     "setData of a random preloaded znode",
	"getData":     "getData of a random preloaded znode",
	"getChildren": "getChildren of a parent with --key-space children",
	"lock":        "one handoff of an ephemeral-sequential lock (the recipe: create, getChildren, watch the predecessor; then delete)",
	"zkwatch":     "setData of one znode that --watchers watchers watch with one-shot data watches, re-armed after each event (use --clients 1 and a --rate they can follow: changes that land before a watch is re-armed coalesce into one event)",
	"zkmixed":     "getData with probability --read-ratio, else setData",
}

var zkACL = zk.WorldACL(zk.PermAll)

// zkLoad is a workload over the ZooKeeper protocol.
type zkLoad struct {
	name  string
	opts  Options
	conns []*zk.Conn
	root  string // the workload's parent znode

	// zkwatch only
	watchPath   string
	watchCancel context.CancelFunc
	watchWG     sync.WaitGroup
	events      atomic.Int64
	shards      []*lockedHist
	watchErr    atomic.Value // first watcher error, a string
}

// quietLogger drops go-zookeeper's connection chatter.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// connectZK opens one session and waits until it is established.
func connectZK(ctx context.Context, servers []string) (*zk.Conn, error) {
	c, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				// go-zookeeper keeps sending to this channel; nobody
				// else reads it, and it is buffered, so let it be.
				go func() {
					for range events {
					}
				}()
				return c, nil
			}
			if ev.State == zk.StateAuthFailed || ev.State == zk.StateExpired {
				c.Close()
				return nil, fmt.Errorf("session: %v", ev.State)
			}
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("no session with %v: %w", servers, ctx.Err())
		}
	}
}

// NewZK opens opts.Conns sessions to servers and prepares workload name.
func NewZK(ctx context.Context, name string, servers []string, opts Options) (Workload, error) {
	opts = opts.withDefaults()
	if _, ok := ZKWorkloads[name]; !ok {
		return nil, fmt.Errorf("ZooKeeper workload %q: %w", name, ErrUnknownWorkload)
	}
	if !strings.HasPrefix(opts.Prefix, "/") {
		opts.Prefix = "/" + opts.Prefix
	}
	l := &zkLoad{name: name, opts: opts, root: path.Join(opts.Prefix, name)}
	for range opts.Conns {
		c, err := connectZK(ctx, servers)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("connect to ZooKeeper %v: %w", servers, err)
		}
		l.conns = append(l.conns, c)
	}
	if err := createParents(l.conns[0], l.root); err != nil {
		l.Close()
		return nil, err
	}
	switch name {
	case "setData", "getData", "getChildren", "zkmixed":
		if err := l.preload(ctx); err != nil {
			l.Close()
			return nil, err
		}
	case "zkwatch":
		if err := l.startWatchers(ctx); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// createParents creates p and its missing ancestors.
func createParents(c *zk.Conn, p string) error {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		if _, err := c.Create(cur, nil, 0, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	return nil
}

func (l *zkLoad) node(i int64) string { return l.root + "/" + keyName(i, l.opts.KeySize) }

func (l *zkLoad) preload(ctx context.Context) error {
	val := value(l.opts.ValueSize, workerRand(-1))
	err := parallel(ctx, int64(l.opts.KeySpace), 4*len(l.conns), func(ctx context.Context, w int, i int64) error {
		_, err := l.conns[w%len(l.conns)].Create(l.node(i), val, 0, zkACL)
		if errors.Is(err, zk.ErrNodeExists) {
			_, err = l.conns[w%len(l.conns)].Set(l.node(i), val, -1)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("preload %d znodes: %w", l.opts.KeySpace, err)
	}
	return nil
}

func (l *zkLoad) startWatchers(ctx context.Context) error {
	l.watchPath = l.root + "/watched"
	if _, err := l.conns[0].Create(l.watchPath, nil, 0, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", l.watchPath, err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.watchCancel = cancel
	l.shards = make([]*lockedHist, len(l.conns))
	for i := range l.shards {
		l.shards[i] = &lockedHist{h: hist.New()}
	}
	armed := make(chan error, l.opts.Watchers)
	for i := range l.opts.Watchers {
		c := l.conns[i%len(l.conns)]
		shard := l.shards[i%len(l.shards)]
		l.watchWG.Add(1)
		go func() {
			defer l.watchWG.Done()
			_, stat, ch, err := c.GetW(l.watchPath)
			armed <- err
			if err != nil {
				return
			}
			version := stat.Version
			for {
				select {
				case <-wctx.Done():
					return
				case ev := <-ch:
					now := time.Now()
					if ev.Type != zk.EventNodeDataChanged {
						if wctx.Err() == nil && ev.Err != nil {
							l.watchErr.CompareAndSwap(nil, ev.Err.Error())
						}
						return
					}
					l.events.Add(1)
					var data []byte
					data, stat, ch, err = c.GetW(l.watchPath)
					if err != nil {
						if wctx.Err() == nil {
							l.watchErr.CompareAndSwap(nil, err.Error())
						}
						return
					}
					// A one-shot watch fires once for any number of
					// changes before it is re-armed; only when exactly
					// one happened is the data read now the data of
					// the change that fired it.
					if stat.Version == version+1 {
						if ts, ok := stampOf(data); ok {
							shard.mu.Lock()
							shard.h.Record(now.Sub(ts))
							shard.mu.Unlock()
						}
					}
					version = stat.Version
				}
			}
		}()
	}
	for range l.opts.Watchers {
		select {
		case err := <-armed:
			if err != nil {
				return fmt.Errorf("arm %d watches: %w", l.opts.Watchers, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("arm %d watches: %w", l.opts.Watchers, ctx.Err())
		}
	}
	return nil
}

func (l *zkLoad) watches() bool { return l.name == "zkwatch" }

func (l *zkLoad) Drain(ctx context.Context, ops int64) (*hist.Histogram, int64, int64) {
	expected := ops * int64(l.opts.Watchers)
	// One-shot watches coalesce changes, so fewer events than expected may
	// be all there will ever be: wait until the count stops moving.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, still := int64(-1), 0
	for ctx.Err() == nil {
		n := l.events.Load()
		if n >= expected {
			break
		}
		if n == last {
			still++
			if still >= 20 { // a second without a new event
				break
			}
		} else {
			last, still = n, 0
		}
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

func (l *zkLoad) Worker(i int) Worker {
	c := l.conns[i%len(l.conns)]
	r := workerRand(i)
	val := value(l.opts.ValueSize, r)
	randNode := func() string { return l.node(r.Int64N(int64(l.opts.KeySpace))) }
	switch l.name {
	case "create":
		return func(_ context.Context, seq int64) error {
			_, err := c.Create(l.node(seq), val, 0, zkACL)
			return err
		}
	case "setData":
		return func(context.Context, int64) error {
			_, err := c.Set(randNode(), val, -1)
			return err
		}
	case "getData":
		return func(context.Context, int64) error {
			_, _, err := c.Get(randNode())
			return err
		}
	case "getChildren":
		return func(context.Context, int64) error {
			kids, _, err := c.Children(l.root)
			if err == nil && len(kids) < l.opts.KeySpace {
				err = fmt.Errorf("getChildren %s: %d children, want at least %d", l.root, len(kids), l.opts.KeySpace)
			}
			return err
		}
	case "lock":
		lock := zk.NewLock(c, l.root, zkACL)
		return func(context.Context, int64) error {
			if err := lock.Lock(); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
			if err := lock.Unlock(); err != nil {
				return fmt.Errorf("unlock: %w", err)
			}
			return nil
		}
	case "zkwatch":
		pad := val[:max(0, len(val)-8)]
		return func(context.Context, int64) error {
			if msg, ok := l.watchErr.Load().(string); ok {
				return fmt.Errorf("a watcher failed: %s", msg)
			}
			_, err := c.Set(l.watchPath, stampValue(pad), -1)
			return err
		}
	case "zkmixed":
		return func(context.Context, int64) error {
			if r.Float64() < l.opts.ReadRatio {
				_, _, err := c.Get(randNode())
				return err
			}
			_, err := c.Set(randNode(), val, -1)
			return err
		}
	}
	panic("unreachable: workload validated in NewZK")
}

func (l *zkLoad) Close() error {
	if l.watchCancel != nil {
		l.watchCancel()
	}
	l.watchWG.Wait()
	for _, c := range l.conns {
		c.Close()
	}
	return nil
}
