// Package deploy holds how Janus is deployed (a StatefulSet, a systemd
// unit, a container image, a Grafana dashboard) and the tests that check
// them. It is a module of its own so that the Kubernetes and image
// libraries its tests use do not weigh on the server's module.
package deploy
