// Package etcdapi serves the etcd v3 gRPC API (KV, Watch, Lease, Cluster,
// Maintenance, Auth, and the v3lock and v3election services) and etcd's JSON
// gateway on a core.Backend, so that etcdctl, clientv3 and the Kubernetes API
// server work against Janus unchanged.
//
// Every request is validated here, with etcd's own gRPC codes and messages
// (clientv3 matches errors by them), then translated into one core.Op or a
// read on a core.View. The package never reaches the store: it knows the
// member only through core.Backend, and through optional interfaces a
// backend may add (a snapshotter for Maintenance.Snapshot).
//
// Where Janus differs from etcd v3.7.3:
//
//   - Maintenance.Snapshot streams an etcd v3.7 backend file that the
//     backend builds from its latest state (package backup): etcdutl
//     restores it, but it holds no history (its current revision is
//     marked compacted) and it carries Janus's own snapshot in an extra
//     bucket, so it is larger than etcd's file for the same keys.
//   - KV.RangeStream serves every chunk from one view opened when the
//     stream starts, so a compaction while a client reads slowly waits for
//     the stream instead of failing its next chunk as etcd's does.
//   - Hash and HashKV digest Janus's keyspace, not etcd's bbolt pages:
//     replicas of Janus agree with each other, not with etcd.
//   - Defragment is accepted and does nothing; MoveLeader and membership
//     changes wait for replication.
package etcdapi
