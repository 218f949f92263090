// Package etcdapi serves the etcd v3 gRPC API (KV, Watch, Lease, Cluster,
// Maintenance, Auth, and the v3lock and v3election services) and etcd's JSON
// gateway on a core.Backend, so that etcdctl, clientv3 and the Kubernetes API
// server work against Janus unchanged.
//
// Every request is validated here, with etcd's own gRPC codes and messages
// (clientv3 matches errors by them), then translated into one core.Op or a
// read on a core.View. The package never reaches the store: it knows the
// member only through core.Backend.
package etcdapi
