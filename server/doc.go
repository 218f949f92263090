// Package server runs one Janus member: it binds the replicated log (zab),
// the versioned state (store), the deterministic state machine (core), the
// watch hub and the lessor into the core.Backend that both protocol faces
// serve. It opens no listeners; the binary wires the faces to a Member.
package server
