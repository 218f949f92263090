package migrate

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/translate"
)

// dryRun lists what a copy would skip or change, without writing to the
// target: it reads the source, and the target only to count what it holds
// already.
func (m *zkMigration) dryRun(ctx context.Context, rep *Report) error {
	if err := m.openStream(ctx, false); err != nil {
		return err
	}
	out := m.cfg.Out
	var nodes, ephemerals, dropped, hidden int
	var bytes int64
	err := walkZK(ctx, m.reader(ctx), m.root(), func(n znode) error {
		switch {
		case isEphemeral(n.owner):
			ephemerals++
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("ephemeral %s (session 0x%x)", n.path, n.owner))
			fmt.Fprintf(out, "would skip ephemeral %s (session 0x%x): its owner re-creates it\n", n.path, n.owner)
			return nil
		case m.dstEtcd != nil && !isOpenACL(n.acl):
			dropped++
			fmt.Fprintf(out, "would drop the ACL of %s (%s): etcd cannot express it\n", n.path, aclString(n.acl))
		case m.dstZK != nil && checkACLReadable(n.path, n.acl) != nil:
			hidden++
			fmt.Fprintf(out, "cannot copy the ACL of %s: %v\n", n.path, checkACLReadable(n.path, n.acl))
		}
		nodes++
		bytes += int64(len(n.data))
		return nil
	})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	rep.ACLsDropped = dropped
	have := 0
	if err := m.walkTarget(ctx, func(znode) error { have++; return nil }); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	fmt.Fprintf(out, "dry run: would copy %d nodes (%d bytes) from %s to %s; skip %d ephemerals; drop %d ACLs", nodes, bytes, m.cfg.From, m.cfg.To, ephemerals, dropped)
	if hidden > 0 {
		fmt.Fprintf(out, "; %d ACLs hidden from this session (the copy would stop: add --auth)", hidden)
	}
	fmt.Fprintf(out, "\ncontainer and TTL nodes, if any, would be written as persistent nodes: ZooKeeper does not show a client a node's mode\n")
	if have > 0 {
		fmt.Fprintf(out, "the target already holds %d nodes there: a copy overwrites those the source has; --follow and --cutover also delete the others\n", have)
	}
	return nil
}

// dryRun lists what a copy would skip or change, without writing to the
// target.
func (m *etcdMigration) dryRun(ctx context.Context, rep *Report) error {
	out := m.cfg.Out
	var keys, hiddenFromZK int
	var bytes int64
	rev, err := pageEtcd(ctx, m.src, prefixRange(m.cfg.From.Path), 0, func(kvs []*mvccpb.KeyValue) error {
		for _, kv := range kvs {
			if why, ok := skip(kv); ok {
				rep.Skipped = append(rep.Skipped, why)
				fmt.Fprintf(out, "would skip %s\n", why)
				continue
			}
			if !translate.IsZNode(kv.Key) {
				hiddenFromZK++
				fmt.Fprintf(out, "would copy %q, which the target's ZooKeeper face cannot show (not a ZooKeeper path)\n", kv.Key)
			}
			keys++
			bytes += int64(len(kv.Value))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	r := prefixRange(m.cfg.From.Path)
	have, err := m.dst.Get(ctx, r.key, clientv3.WithRange(r.end), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	fmt.Fprintf(out, "dry run: would copy %d keys (%d bytes) at source revision %d from %s to %s; skip %d; %d not visible through ZooKeeper\n",
		keys, bytes, rev, m.cfg.From, m.cfg.To, len(rep.Skipped), hiddenFromZK)
	if have.Count > 0 {
		fmt.Fprintf(out, "the target already holds %d keys there: a copy overwrites those the source has\n", have.Count)
	}
	return nil
}
