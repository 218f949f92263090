package etcdapi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// snapshotter is implemented by a backend that can stream a consistent
// copy of its state. It is optional: core.Backend does not require it, and
// Snapshot answers Unimplemented without it.
type snapshotter interface {
	// WriteSnapshot writes the copy to w and returns the applied index it
	// shows. An error from w ends it.
	WriteSnapshot(w io.Writer) (uint64, error)
}

const (
	// snapshotChunk is the blob size of one response, etcd's
	// snapshotSendBufferSize.
	snapshotChunk = 32 * 1024
	// snapshotAlign is what clientv3 checks the saved size against: a
	// file whose size modulo 512 is 32 carries a sha256 trailer
	// (snapshot.hasChecksum). A bbolt file is a multiple of its page size
	// already; any other content would be padded with zeros to get there.
	snapshotAlign = 512
	// snapshotVersion is the etcd storage version of what the backend
	// writes (etcd v3.7's schema), which etcdctl prints and saves.
	snapshotVersion = "3.7.0"
)

// Snapshot streams the backend's snapshot as etcd does: the content in
// 32 KiB blobs, then one blob holding the sha256 of all the content.
//
// The content is an etcd v3.7 backend file (see backup.WriteEtcdFile):
// etcdctl saves and checks it, etcdutl restores it into an etcd data
// directory and `janus snapshot restore` into a Janus one.
//
// The total size is not known until the copy ends, so remaining_bytes is a
// lower bound (the bytes already read ahead) and 0 only on the last content
// blob and on the digest; clientv3 does not read it.
func (m *maintenanceServer) Snapshot(_ *pb.SnapshotRequest, srv grpc.ServerStreamingServer[pb.SnapshotResponse]) error {
	if err := m.s.requireRoot(srv.Context()); err != nil {
		return err
	}
	snap, ok := m.s.b.(snapshotter)
	if !ok {
		return status.Error(codes.Unimplemented, "janus: this member cannot take snapshots")
	}
	pr, pw := io.Pipe()
	type result struct {
		applied uint64
		err     error
	}
	done := make(chan result, 1)
	go func() {
		applied, err := snap.WriteSnapshot(pw)
		pw.CloseWithError(err) // nil: EOF for the reader
		done <- result{applied, err}
	}()
	// Whatever ends the stream, the writer must not outlive it: closing
	// the reader fails its next write.
	finished := false
	defer func() {
		pr.Close()
		if !finished {
			<-done
		}
	}()

	h := sha256.New()
	var sent int64
	send := func(blob []byte, remaining int) error {
		h.Write(blob)
		sent += int64(len(blob))
		return srv.Send(&pb.SnapshotResponse{RemainingBytes: uint64(remaining), Blob: blob, Version: snapshotVersion})
	}
	// One blob is read ahead so that the last content blob is known when
	// it goes out: it carries the padding and remaining_bytes 0.
	var pending []byte
	for {
		// Send does not wait for the client, so a blob cannot be reused.
		buf := make([]byte, snapshotChunk)
		n, err := io.ReadFull(pr, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			m.s.log.Warn("snapshot failed", "err", err, "sent", sent)
			return status.Error(codes.Internal, fmt.Sprintf("janus: snapshot: %v", err))
		}
		if pending != nil && n > 0 {
			if err := send(pending, n); err != nil {
				return err
			}
			pending = nil
		}
		if n > 0 {
			pending = buf[:n]
		}
		if err != nil { // the end of the content
			break
		}
	}
	// The reader saw EOF, so the writer has returned without error (an
	// error would have reached the reader instead).
	r := <-done
	finished = true
	if r.err != nil {
		return status.Error(codes.Internal, fmt.Sprintf("janus: snapshot: %v", r.err))
	}
	if pad := (sent + int64(len(pending))) % snapshotAlign; pad != 0 {
		pending = append(pending, make([]byte, snapshotAlign-pad)...)
	}
	if err := send(pending, 0); err != nil {
		return err
	}
	m.s.log.Info("snapshot sent", "bytes", sent, "applied", r.applied)
	return srv.Send(&pb.SnapshotResponse{RemainingBytes: 0, Blob: h.Sum(nil), Version: snapshotVersion})
}
