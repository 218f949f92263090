package main

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/url"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/januskv/janus/console"
	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/tlsfiles"
)

// memberDialer returns how the console connects to another member: an
// etcd client of the member's client URL, over the client TLS settings
// this member serves with. The console keeps the client between
// refreshes and closes it.
func memberDialer(clientTLS *tlsfiles.Source, logger *slog.Logger) func(core.ClusterMember) (console.MemberClient, error) {
	return func(m core.ClusterMember) (console.MemberClient, error) {
		if m.EtcdURL == "" {
			return nil, errNoClientURL
		}
		var tlsCfg *tls.Config
		if clientTLS != nil {
			u, err := url.Parse(m.EtcdURL)
			if err != nil {
				return nil, err
			}
			tlsCfg = clientTLS.ClientConfig(u.Hostname())
		}
		// No DialTimeout: the client connects in the background, and a
		// member that is down answers each Status with an error instead
		// of holding the dial.
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: []string{m.EtcdURL},
			TLS:       tlsCfg,
			Logger:    zap.NewNop(),
		})
		if err != nil {
			return nil, err
		}
		return &memberClient{cli: cli, m: m, log: logger}, nil
	}
}

var errNoClientURL = errors.New("no client URL known")

// memberClient asks one member for its status as etcdctl endpoint status
// does.
type memberClient struct {
	cli *clientv3.Client
	m   core.ClusterMember
	log *slog.Logger
}

func (c *memberClient) Status(ctx context.Context) console.MemberState {
	st, err := c.cli.Status(ctx, c.m.EtcdURL)
	if err != nil {
		c.log.Debug("console: member did not answer", "member", c.m.ID, "err", err)
		return console.MemberState{Err: err.Error()}
	}
	return console.MemberState{Up: len(st.Errors) == 0, LeaderID: st.Leader, Epoch: st.RaftTerm,
		AppliedIndex: st.RaftAppliedIndex, CommitIndex: st.RaftIndex, DBSize: st.DbSize}
}

func (c *memberClient) Close() error { return c.cli.Close() }
