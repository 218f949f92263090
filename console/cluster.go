package console

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/januskv/janus/core"
)

// MemberState is what one member says about itself, as etcd's
// Maintenance.Status reports it; Err says why it did not answer.
type MemberState struct {
	Up           bool   `json:"up"`
	Err          string `json:"error,omitempty"`
	LeaderID     uint64 `json:"leaderId,omitempty"`
	Epoch        uint64 `json:"epoch,omitempty"`
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	CommitIndex  uint64 `json:"commitIndex,omitempty"`
	DBSize       int64  `json:"dbSize,omitempty"`
}

// memberView is one row of the cluster view.
type memberView struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Role    string `json:"role"`
	PeerURL string `json:"peerURL"`
	EtcdURL string `json:"etcdURL"`
	ZKAddr  string `json:"zkAddr"`
	Self    bool   `json:"self"`
	MemberState
	// Lag is how many committed entries the member has yet to apply,
	// counted against the leader's commit index.
	Lag int64 `json:"lag"`
}

// probeTimeout bounds how long the cluster view waits for a member: one
// that does not answer in time is shown down rather than holding the page.
const probeTimeout = 2 * time.Second

// cluster answers /ui/api/cluster: the members with their roles, this
// member's status, each other member's own report when it answers, and
// the alarms.
func (c *Console) cluster(r *request) (any, error) {
	st := c.cfg.Backend.Status()
	members := make([]memberView, len(st.Members))
	var wg sync.WaitGroup
	for i, m := range st.Members {
		mv := memberView{ID: strconv.FormatUint(m.ID, 16), Name: m.Name, PeerURL: m.PeerURL, EtcdURL: m.EtcdURL,
			ZKAddr: m.ZKAddr, Self: m.ID == st.MemberID, Role: "follower"}
		switch {
		case m.IsObserver:
			mv.Role = "observer"
		case m.ID == st.LeaderID:
			mv.Role = "leader"
		}
		members[i] = mv
		switch {
		case mv.Self:
			members[i].MemberState = MemberState{Up: st.Err == nil, LeaderID: st.LeaderID, Epoch: st.Epoch,
				AppliedIndex: st.AppliedIndex, CommitIndex: st.CommitIndex, DBSize: st.DBSize}
			if st.Err != nil {
				members[i].Err = st.Err.Error()
			}
		case c.cfg.Dial != nil:
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
				defer cancel()
				members[i].MemberState = c.probe(ctx, m)
			}()
		}
	}
	wg.Wait()
	c.members.forget(st.Members)
	var leaderCommit uint64
	for _, m := range members {
		if m.Role == "leader" && m.Up {
			leaderCommit = m.CommitIndex
		}
	}
	for i := range members {
		if members[i].Up && leaderCommit > members[i].AppliedIndex {
			members[i].Lag = int64(leaderCommit - members[i].AppliedIndex)
		}
	}
	alarms := []string{}
	for _, a := range c.cfg.Backend.Alarms() {
		alarms = append(alarms, alarmName(a))
	}
	errText := ""
	if st.Err != nil {
		errText = st.Err.Error()
	}
	return map[string]any{
		"clusterId": strconv.FormatUint(st.ClusterID, 16), "memberId": strconv.FormatUint(st.MemberID, 16),
		"leaderId": strconv.FormatUint(st.LeaderID, 16), "epoch": st.Epoch, "rev": st.Rev, "compactRev": st.CompactRev,
		"dbSize": st.DBSize, "quotaBytes": st.QuotaBytes, "alarms": alarms, "error": errText, "members": members,
	}, nil
}

// MemberClient is a connection to another member that the console keeps
// from one refresh of the cluster view to the next.
type MemberClient interface {
	// Status asks the member how it is, as etcd's Maintenance.Status.
	Status(ctx context.Context) MemberState
	Close() error
}

// memberClients are the console's connections to the other members, one
// per member, dialled on first use and kept while the member keeps its ID
// and client URL: refreshing the cluster view every two seconds must not
// open a connection each time.
type memberClients struct {
	mu      sync.Mutex
	closed  bool
	clients map[uint64]memberClient
}

type memberClient struct {
	url string
	cli MemberClient
}

var errConsoleClosed = errors.New("console closed")

// probe asks member m how it is over the console's client for it.
func (c *Console) probe(ctx context.Context, m core.ClusterMember) MemberState {
	cli, err := c.members.get(m, c.cfg.Dial)
	if err != nil {
		return MemberState{Err: err.Error()}
	}
	return cli.Status(ctx)
}

// get returns the client for m, dialling one if there is none for its
// current client URL.
func (mc *memberClients) get(m core.ClusterMember, dial func(core.ClusterMember) (MemberClient, error)) (MemberClient, error) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.closed {
		return nil, errConsoleClosed
	}
	if have, ok := mc.clients[m.ID]; ok {
		if have.url == m.EtcdURL {
			return have.cli, nil
		}
		have.cli.Close() // the member moved: its old address is no use
	}
	cli, err := dial(m)
	if err != nil {
		delete(mc.clients, m.ID)
		return nil, err
	}
	if mc.clients == nil {
		mc.clients = map[uint64]memberClient{}
	}
	mc.clients[m.ID] = memberClient{url: m.EtcdURL, cli: cli}
	return cli, nil
}

// forget closes the clients of members that are no longer in members.
func (mc *memberClients) forget(members []core.ClusterMember) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for id, have := range mc.clients {
		kept := false
		for _, m := range members {
			kept = kept || m.ID == id
		}
		if !kept {
			have.cli.Close()
			delete(mc.clients, id)
		}
	}
}

// close closes every client; later probes are refused.
func (mc *memberClients) close() {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	mc.closed = true
	for id, have := range mc.clients {
		have.cli.Close()
		delete(mc.clients, id)
	}
}

// alarmName writes an alarm as etcdctl alarm list does.
func alarmName(a core.Alarm) string {
	return "memberID:" + strconv.FormatUint(a.Member, 10) + " alarm:" + a.Type.String()
}
