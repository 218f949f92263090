package console

import (
	"context"
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
		case c.cfg.Probe != nil:
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
				defer cancel()
				members[i].MemberState = c.cfg.Probe(ctx, m)
			}()
		}
	}
	wg.Wait()
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

// alarmName writes an alarm as etcdctl alarm list does.
func alarmName(a core.Alarm) string {
	return "memberID:" + strconv.FormatUint(a.Member, 10) + " alarm:" + a.Type.String()
}
