package server

import (
	"context"
	"fmt"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zab"
)

// Submit implements core.Backend: the op's place in the log order is fixed
// when Submit returns.
func (m *Member) Submit(ctx context.Context, op *core.Op) (core.Pending, error) {
	if err := m.admit(ctx, op); err != nil {
		return nil, fmt.Errorf("propose: %w", err)
	}
	p, err := m.zab.Submit(ctx, core.EncodeOp(op))
	if err != nil {
		m.counts.proposalsFailed.Add(1)
		return nil, clusterErr("propose", err)
	}
	return pending{p, m}, nil
}

type pending struct {
	p *zab.Pending
	m *Member
}

func (p pending) Answered() bool { return p.p.Answered() }

func (p pending) Wait(ctx context.Context) (*core.Result, error) {
	r, err := p.p.Wait(ctx)
	if err != nil {
		p.m.counts.proposalsFailed.Add(1)
		return nil, clusterErr("propose", err)
	}
	return r.(*core.Result), nil
}
