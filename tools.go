//go:build deps

// This file pins the modules the project's packages and tests use so that
// parallel work on separate packages starts from one go.mod.
package main

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/go-zookeeper/zk"
	_ "go.etcd.io/etcd/api/v3/etcdserverpb"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/client/v3/concurrency"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	_ "go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	_ "google.golang.org/grpc"
)
