package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/url"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/januskv/janus/console"
	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/tlsfiles"
)

// memberProbe returns how the console asks another member about itself:
// etcd's Maintenance.Status on the member's client URL, as etcdctl
// endpoint status does, over the client TLS settings this member serves
// with.
func memberProbe(clientTLS *tlsfiles.Source, logger *slog.Logger) func(context.Context, core.Member) console.MemberState {
	return func(ctx context.Context, m core.Member) console.MemberState {
		if m.EtcdURL == "" {
			return console.MemberState{Err: "no client URL known"}
		}
		var tlsCfg *tls.Config
		if clientTLS != nil {
			u, err := url.Parse(m.EtcdURL)
			if err != nil {
				return console.MemberState{Err: err.Error()}
			}
			tlsCfg = clientTLS.ClientConfig(u.Hostname())
		}
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: []string{m.EtcdURL},
			TLS:       tlsCfg,
			Context:   ctx,
			Logger:    zap.NewNop(),
		})
		if err != nil {
			return console.MemberState{Err: err.Error()}
		}
		defer cli.Close()
		st, err := cli.Status(ctx, m.EtcdURL)
		if err != nil {
			logger.Debug("console: member did not answer", "member", m.ID, "err", err)
			return console.MemberState{Err: err.Error()}
		}
		return console.MemberState{Up: len(st.Errors) == 0, LeaderID: st.Leader, Epoch: st.RaftTerm,
			AppliedIndex: st.RaftAppliedIndex, CommitIndex: st.RaftIndex, DBSize: st.DbSize}
	}
}
