// Package zkapi serves the ZooKeeper client protocol (3.8 wire format) on
// Janus's core.
//
// A Server accepts connections, performs the session handshake, and turns
// each request into a core.Op proposed through the core.Backend or a read on
// one of its Views. A ZooKeeper session is a core lease carrying the session
// timeout and password; pings keep the lease alive and closeSession revokes
// it, which deletes the session's ephemeral nodes in the core.
//
// Each connection has three goroutines. The reader decodes and prepares
// requests in order (validation, ACL fix-up, addAuth), submits writes to the
// log without waiting for them (core.Backend.Submit keeps one submitter's
// order) and queues every request on a bounded FIFO. The replier answers the
// FIFO strictly in order: it waits for a write's result, and runs a read only
// when it reaches the head, so a read sees the session's earlier writes and
// none of its later ones (the reader submits a write only after the reads
// before it are answered). A write that fails for any reason but a
// state-machine refusal closes the connection at once, since later writes
// may commit without it. Replies and notifications are encoded straight
// into one buffer per connection; the replier writes it to the socket
// itself when its FIFO runs empty or before it waits on anything but the
// store, so pipelined replies leave in one write, and the writer
// goroutine sends notifications and what arrives while a batch is being
// written (see queue.go). One hub subscription for the
// whole server feeds the watch manager, which turns committed events into
// ZooKeeper watch notifications and queues them on the watching connections.
// The manager records the highest revision it has dispatched; before a reply
// that reflects revision R is queued, the replier waits until R has been
// dispatched, so a notification always reaches the client before any reply
// that shows the change. A triggered watch is consumed for every watcher,
// but its event reaches only connections allowed to READ the node, as in
// ZooKeeper 3.8.4 and Debian's patched 3.8.0 (the fix for CVE-2024-23944).
//
// The wire codec lives in the jute subpackage; this package decides what the
// records mean: path rules, ACL fix-up, error codes, Stats and watches as
// ZooKeeper 3.8 reports them.
package zkapi
