// Package k8s runs the Kubernetes API server's own storage conformance
// tests (the exported RunTest* functions of k8s.io/apiserver's
// pkg/storage/testing) against a brand-new Janus, through the API server's
// etcd3 storage layer, as Kubernetes runs them against etcd itself.
//
// It is a module of its own so that the API server's dependencies never
// reach Janus's main module; its go.mod replaces Janus with this checkout.
package k8s
