package zab

import "context"

// replica runs replication for a member with peers.
type replica struct{}

func (r *replica) status(stopped bool) Status                         { return Status{Stopped: stopped} }
func (r *replica) callLeader(context.Context, []byte) ([]byte, error) { return nil, ErrNoLeader }
func (r *replica) readIndex(context.Context) (uint64, error)          { return 0, ErrNoLeader }
