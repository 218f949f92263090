package zab

import (
	"context"
)

// TransferLeadership hands this member's leadership to target, a voter
// of the active configuration (etcd's MoveLeader), and returns once this
// member follows target as the leader of a later epoch. Only the leader
// takes it (ErrNotLeader elsewhere: the caller forwards it to the
// leader); a target that does not vote is refused (ErrBadTransferee), and
// so is a second transfer while one is under way (ErrTransferPending).
// A transfer to this leader itself returns nil at once. While the
// transfer is under way the leader refuses new proposals with ErrNoLeader
// (nothing proposed), so that target catches up with a log that no
// longer grows. If target does not lead within the transfer's deadline
// (about two election timeouts), or another member does, it fails with
// ErrTransferTimeout: the old leader proposes again if it still leads,
// or a normal election follows. If ctx ends first, the transfer goes on
// without the caller.
func (m *Member) TransferLeadership(ctx context.Context, target uint64) error {
	w := &rpcWait{done: make(chan rpcResult, 1)}
	_, err := m.rep.rpc(ctx, loopEvent{transfer: w, transferTo: target}, w)
	return err
}
