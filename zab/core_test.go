package zab

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// TestRoleNames keeps the names Status, RoleChanges, logs and JSON
// showed when roles were strings.
func TestRoleNames(t *testing.T) {
	for _, tc := range []struct {
		role Role
		name string
	}{
		{RoleLooking, "looking"},
		{RoleFollower, "follower"},
		{RoleObserver, "observer"},
		{RoleLeader, "leader"},
		{Role(9), "Role(9)"},
	} {
		if got := tc.role.String(); got != tc.name {
			t.Errorf("Role(%d).String() = %q, want %q", tc.role, got, tc.name)
		}
		b, err := json.Marshal(RoleChange{Role: tc.role})
		if want := fmt.Sprintf(`{"Role":%q,"LeaderID":0,"Epoch":0}`, tc.name); err != nil || string(b) != want {
			t.Errorf("JSON of %v = %s, %v; want %s", tc.role, b, err, want)
		}
	}
}

// TestCoreIsDeterministic drives two Cores built from the same seed with
// the same inputs and expects the same Readies, the property a simulator
// replays failures with.
func TestCoreIsDeterministic(t *testing.T) {
	run := func() []Ready {
		var out []Ready
		c, err := NewCore(CoreConfig{ID: 1, Voters: []uint64{1, 2, 3}, ElectionTicks: 5, Seed: [2]uint64{7, 9}, Log: &memLog{}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Ready())
		for i := range 40 {
			c.Tick()
			if i == 3 {
				// Member 2 answers: it votes for 1 in the same round.
				c.Step(2, Message{Type: MsgNotification, State: stateLooking, Round: 1, Leader: 1}, 0)
			}
			if i == 8 {
				// ... and joins it.
				c.Step(2, Message{Type: MsgFollowerInfo, Nonce: 5}, 0)
			}
			c.ReadIndex(uint64(i))
			out = append(out, c.Ready())
		}
		return out
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		for i := range a {
			if !reflect.DeepEqual(a[i], b[i]) {
				t.Fatalf("Ready %d differs between two runs from one seed:\n%+v\n%+v", i, a[i], b[i])
			}
		}
	}
	followed := false
	for _, rd := range a {
		for _, o := range rd.Messages {
			followed = followed || o.Msg.Type == MsgLeaderInfo
		}
	}
	if !followed {
		t.Fatal("member 1 never led member 2: the run exercised only the election")
	}
}
