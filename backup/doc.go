// Package backup converts a Janus state to and from the files operators
// of etcd and ZooKeeper keep as backups:
//
//   - an etcd v3.7 backend file (a bbolt database in etcd's schema), which
//     is what `etcdctl snapshot save` receives from Janus and what
//     `etcdutl snapshot restore` turns into an etcd data directory. The
//     file carries Janus's own snapshot in an extra bucket etcd ignores, so
//     a Janus→file→Janus round trip loses nothing ZooKeeper clients see;
//   - an etcd backend file saved from a real etcd, restored into a new
//     Janus data directory (an etcd estate moved into Janus offline);
//   - a ZooKeeper 3.8 data directory (snapshot.N and log.N files), restored
//     into a new Janus data directory.
//
// It reads the member's state only through a store.View and writes a
// restored state only through store.RestoreSnapshot, so the store's
// format stays the store's business.
package backup
