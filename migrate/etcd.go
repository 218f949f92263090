package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/translate"
)

// keyRange is an etcd key range [key, end), narrowed by only when set.
type keyRange struct {
	key, end string
	only     func(key []byte) bool
}

// prefixRange is the range of keys starting with prefix ("" is every key),
// as etcdctl --prefix means it: a byte prefix.
func prefixRange(prefix string) keyRange {
	if prefix == "" {
		return keyRange{key: "\x00", end: "\x00"}
	}
	return keyRange{key: prefix, end: clientv3.GetPrefixRangeEnd(prefix)}
}

func (r keyRange) includes(key []byte) bool { return r.only == nil || r.only(key) }

// pageSize bounds one Range response while listing a keyspace.
const pageSize = 1000

// listEtcd returns every key in r at revision rev (0: the latest, but one
// revision for the whole listing: the first page's).
func listEtcd(ctx context.Context, cli *clientv3.Client, r keyRange, rev int64) ([]*mvccpb.KeyValue, error) {
	var out []*mvccpb.KeyValue
	_, err := pageEtcd(ctx, cli, r, rev, func(kvs []*mvccpb.KeyValue) error {
		out = append(out, kvs...)
		return nil
	})
	return out, err
}

// pageEtcd calls fn with each page of the keys in r at one revision, and
// returns that revision.
func pageEtcd(ctx context.Context, cli *clientv3.Client, r keyRange, rev int64, fn func([]*mvccpb.KeyValue) error) (int64, error) {
	start := r.key
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(r.end), clientv3.WithLimit(pageSize)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, start, opts...)
		if err != nil {
			return rev, fmt.Errorf("range from %q: %w", start, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		kvs := resp.Kvs[:0:0]
		for _, kv := range resp.Kvs {
			if r.includes(kv.Key) {
				kvs = append(kvs, kv)
			}
		}
		if err := fn(kvs); err != nil {
			return rev, err
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// connectEtcd returns a client that has answered one request, so a wrong
// address fails here with a clear error rather than later.
func connectEtcd(ctx context.Context, hosts []string, timeout time.Duration) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: hosts, DialTimeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %s: %w", strings.Join(hosts, ","), err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := cli.Get(pctx, "\x00", clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("connect to etcd %s: %w", strings.Join(hosts, ","), err)
	}
	return cli, nil
}

// etcdMigration copies an etcd keyspace to a Janus's etcd face.
type etcdMigration struct {
	cfg      Config
	src, dst *clientv3.Client
	// rev is the source revision the copy was taken at; follow starts
	// after it.
	rev int64
}

func openEtcd(ctx context.Context, cfg Config) (*etcdMigration, error) {
	m := &etcdMigration{cfg: cfg}
	var err error
	if m.src, err = connectEtcd(ctx, cfg.From.Hosts, cfg.DialTimeout); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if m.dst, err = connectEtcd(ctx, cfg.To.Hosts, cfg.DialTimeout); err != nil {
		m.src.Close()
		return nil, fmt.Errorf("target: %w", err)
	}
	return m, nil
}

func (m *etcdMigration) close() {
	m.src.Close()
	m.dst.Close()
}

// skip reports whether kv stays behind, and why.
func skip(kv *mvccpb.KeyValue) (string, bool) {
	switch {
	case translate.IsReserved(kv.Key):
		return fmt.Sprintf("%q: the target's own ZooKeeper system subtree", kv.Key), true
	case kv.Lease != 0:
		return fmt.Sprintf("leased key %q (lease 0x%x)", kv.Key, kv.Lease), true
	}
	return "", false
}

func (m *etcdMigration) copy(ctx context.Context, rep *Report) error {
	prog := &progress{out: m.cfg.Out, every: m.cfg.ProgressEvery, what: "copied"}
	var err error
	m.rev, err = pageEtcd(ctx, m.src, prefixRange(m.cfg.From.Path), 0, func(kvs []*mvccpb.KeyValue) error {
		var ops []clientv3.Op
		for _, kv := range kvs {
			if why, ok := skip(kv); ok {
				rep.Skipped = append(rep.Skipped, why)
				fmt.Fprintf(m.cfg.Out, "skipped %s\n", why)
				continue
			}
			ops = append(ops, clientv3.OpPut(string(kv.Key), string(kv.Value)))
			rep.Copied++
			rep.Bytes += int64(len(kv.Value))
		}
		for len(ops) > 0 {
			n := min(len(ops), m.cfg.BatchSize)
			if _, err := m.dst.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
				return fmt.Errorf("target: put %d keys: %w", n, err)
			}
			prog.add(n)
			ops = ops[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	fmt.Fprintf(m.cfg.Out, "snapshot taken at source revision %d\n", m.rev)
	return nil
}

// follow applies the source's changes after the copied revision until ctx
// ends (at once with Config.Cutover), then cuts over: it reads the source's
// current revision and keeps applying until the watch has delivered
// everything up to it (a progress request makes the source say so even
// when nothing in the prefix changed). Each watch response goes to the
// target as one transaction (or a few, if it holds more distinct keys than
// BatchSize), so a source Txn stays atomic on the target unless it is
// larger than a batch.
func (m *etcdMigration) follow(ctx context.Context, rep *Report) error {
	r := prefixRange(m.cfg.From.Path)
	// The watch and the target writes must outlive the interrupt that
	// asks for the cut-over.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.WithoutCancel(ctx)))
	defer cancel()
	prog := &progress{out: m.cfg.Out, every: m.cfg.ProgressEvery, what: "followed events:"}
	status := &statusPrinter{out: m.cfg.Out, state: m.cfg.State}
	tick := time.NewTicker(m.cfg.StatusEvery)
	defer tick.Stop()
	cutover := ctx.Done()
	if m.cfg.Cutover {
		closed := make(chan struct{})
		close(closed)
		cutover = closed
	}
	var until int64 // the revision a cut-over waits for; 0: none yet
	wch := m.src.Watch(wctx, r.key, clientv3.WithRange(r.end), clientv3.WithRev(m.rev+1))
	for {
		select {
		case <-tick.C:
			status.print(false)
		case <-cutover:
			cutover = nil
			resp, err := m.src.Get(wctx, "\x00", clientv3.WithCountOnly())
			if err != nil {
				return fmt.Errorf("cut-over: read the source's revision: %w", err)
			}
			until = resp.Header.Revision
			if m.rev >= until {
				return m.caughtUp(status)
			}
			if err := m.src.RequestProgress(wctx); err != nil {
				return fmt.Errorf("cut-over: request watch progress: %w", err)
			}
		case resp, ok := <-wch:
			if !ok {
				return errors.New("source watch ended")
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("source watch: %w", err)
			}
			ops := followOps(resp.Events)
			for len(ops) > 0 {
				n := min(len(ops), m.cfg.BatchSize)
				_, err := m.dst.Txn(wctx).Then(ops[:n]...).Commit()
				if err != nil {
					return fmt.Errorf("target: apply source revision %d: %w", resp.Header.Revision, err)
				}
				ops = ops[n:]
			}
			rep.Followed += len(resp.Events)
			prog.add(len(resp.Events))
			m.cfg.State.update(func(s *FollowStatus) { s.Applied += int64(len(resp.Events)) })
			m.rev = resp.Header.Revision
			if until > 0 && m.rev >= until {
				return m.caughtUp(status)
			}
		}
	}
}

func (m *etcdMigration) caughtUp(status *statusPrinter) error {
	m.cfg.State.update(func(s *FollowStatus) { s.CaughtUp = true })
	status.print(true)
	return nil
}

// followOps turns watch events into target writes: a put copies the key, a
// delete deletes it, and a put that attaches a lease deletes it (leased keys
// are not copied). Only each key's last event is kept, in order: etcd
// refuses a Txn that writes one key twice.
func followOps(events []*clientv3.Event) []clientv3.Op {
	last := map[string]int{}
	for i, ev := range events {
		last[string(ev.Kv.Key)] = i
	}
	var ops []clientv3.Op
	for i, ev := range events {
		key := string(ev.Kv.Key)
		if last[key] != i || translate.IsReserved(ev.Kv.Key) {
			continue
		}
		if ev.Type == clientv3.EventTypePut && ev.Kv.Lease == 0 {
			ops = append(ops, clientv3.OpPut(key, string(ev.Kv.Value)))
		} else {
			ops = append(ops, clientv3.OpDelete(key))
		}
	}
	return ops
}

func (m *etcdMigration) verify(ctx context.Context, rep *Report) error {
	r := prefixRange(m.cfg.From.Path)
	read := func(cli *clientv3.Client) (map[string][]byte, error) {
		kvs, err := listEtcd(ctx, cli, r, 0)
		if err != nil {
			return nil, err
		}
		out := map[string][]byte{}
		for _, kv := range kvs {
			if _, ok := skip(kv); !ok {
				out[string(kv.Key)] = kv.Value
			}
		}
		return out, nil
	}
	src, err := read(m.src)
	if err != nil {
		return fmt.Errorf("verify: read source: %w", err)
	}
	dst, err := read(m.dst)
	if err != nil {
		return fmt.Errorf("verify: read target: %w", err)
	}
	d := differ{out: m.cfg.Out, rep: rep}
	for _, k := range unionKeys(src, dst) {
		s, inSrc := src[k]
		t, inDst := dst[k]
		switch {
		case !inDst:
			d.add("only in source: %q", k)
		case !inSrc:
			d.add("only in target: %q", k)
		case !bytes.Equal(s, t):
			d.add("value of %q: source %s, target %s", k, showData(s), showData(t))
		}
	}
	return d.result(len(src))
}
