package zab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testenv"
)

// Membership changes through real Members (Open, the replica driver, the
// membership file), on the in-memory network and on TCP: an observer
// joins on an empty disk (by snapshot), is promoted and then votes, a
// follower and then the leader are removed and say so, and after every
// change every member restarts and comes back with the configuration.

// membershipCluster is a cluster of three voters whose later members join
// (Config.Join) with the starting voters and themselves as observers for
// flags, as an operator would start them; on TCP every member has its own
// loopback port and the transport Open makes.
func membershipCluster(t *testing.T, tcp bool) *cluster {
	c := newCluster(t, 3, 0)
	if tcp {
		ports := testenv.FreePorts(t, 6)
		for id := range c.peers {
			c.peers[id] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[id-1]))
		}
		c.spare = ports[3:]
	}
	c.tweak = func(cfg *Config) {
		if tcp {
			cfg.Transport = nil
		}
		// Small enough that a member joining on an empty disk is sent a
		// snapshot rather than the whole log.
		cfg.MaxDiffEntries = 4
		cfg.Join = cfg.ID > 3
	}
	return c
}

// addNode makes a new member's disk and starting flags (not started).
func (c *cluster) addNode(id uint64) {
	addr := fmt.Sprintf("mem-%d", id)
	if len(c.spare) > 0 {
		addr, c.spare = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.spare[0])), c.spare[1:]
	}
	// Replaced, not changed in place: running members hold the old maps.
	c.observers = maps.Clone(c.observers)
	c.observers[id] = addr
	c.nodes[id] = &testNode{id: id, dir: c.t.TempDir(), sm: &replSM{}}
}

func (c *cluster) addr(id uint64) string {
	if a, ok := c.peers[id]; ok {
		return a
	}
	return c.observers[id]
}

// change has the leader replace the active configuration by what edit
// makes of it (edit must be idempotent: a change whose answer was lost is
// retried against the configuration it made), and returns the active
// configuration once every running member in wait has it.
func (c *cluster) change(what string, edit func(voters, observers []uint64) ([]uint64, []uint64), wait ...uint64) Membership {
	c.t.Helper()
	var got Membership
	eventually(c.t, what, func() bool {
		var l *Member
		for _, id := range c.running() {
			if m := c.nodes[id].m; m.Status().Role == RoleLeader {
				l = m
			}
		}
		if l == nil {
			return false
		}
		active, pending := l.Membership()
		if pending != nil {
			return false
		}
		voters, observers := edit(slices.Clone(active.Voters), slices.Clone(active.Observers))
		if w, _ := NewMembership(voters, observers); slices.Equal(w.Voters, active.Voters) && slices.Equal(w.Observers, active.Observers) {
			got = active // made by an earlier try
			return true
		}
		addrs := maps.Clone(active.Addrs)
		for _, id := range append(slices.Clone(voters), observers...) {
			if addrs[id] == "" {
				addrs[id] = c.addr(id)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := l.ChangeMembership(ctx, MembershipChange{Voters: voters, Observers: observers, Addrs: addrs,
			Meta: active.Meta, Version: active.Version})
		switch {
		case err == nil:
			if !slices.Equal(m.Voters, voters) || !slices.Equal(m.Observers, observers) || m.Version <= active.Version {
				c.t.Fatalf("%s: ChangeMembership answered %s, active was %s", what, m.String(), active.String())
			}
			got = m
			return true
		case retryable(err), errors.Is(err, ErrNotLeader), errors.Is(err, ErrNotCaughtUp),
			errors.Is(err, ErrChangePending), errors.Is(err, ErrStaleMembership),
			errors.Is(err, ErrPeersTooOld): // a follower has not rejoined the leader yet
			return false
		}
		c.t.Fatalf("%s: %v", what, err)
		return false
	})
	for _, id := range wait {
		eventually(c.t, fmt.Sprintf("member %d to have configuration %s", id, got.String()), func() bool {
			active, _ := c.nodes[id].m.Membership()
			return active.Version == got.Version
		})
	}
	return got
}

// restartAll stops every running member, then starts them again, and
// checks that each comes back with the configuration it had.
func (c *cluster) restartAll() {
	c.t.Helper()
	ids := c.running()
	before := map[uint64]Membership{}
	for _, id := range ids {
		m := c.nodes[id].m
		before[id], _ = m.Membership()
		// Persisted before its entry is applied: once applied, it is on
		// disk.
		eventually(c.t, fmt.Sprintf("member %d to apply its configuration's entry", id), func() bool {
			return m.Status().AppliedIndex >= before[id].Index
		})
	}
	for _, id := range ids {
		c.stop(id)
	}
	for _, id := range ids {
		c.start(id)
		got, _ := c.nodes[id].m.Membership()
		had := before[id]
		if got.Version != had.Version || !slices.Equal(got.Voters, had.Voters) ||
			!slices.Equal(got.Observers, had.Observers) || !maps.Equal(got.Addrs, had.Addrs) ||
			got.LastID != had.LastID {
			c.t.Fatalf("member %d restarted with configuration %s (last ID %d), had %s (last ID %d)",
				id, got.String(), got.LastID, had.String(), had.LastID)
		}
	}
}

func without(ids []uint64, id uint64) []uint64 {
	return slices.DeleteFunc(ids, func(x uint64) bool { return x == id })
}

func TestMembershipChangesWithRealMembers(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run(map[bool]string{false: "mem", true: "tcp"}[tcp], func(t *testing.T) {
			c := membershipCluster(t, tcp)
			c.startAll()
			c.leader()
			n := 0
			write := func(on uint64) {
				t.Helper()
				n++
				c.propose(on, fmt.Sprintf("w%d", n))
			}
			for range 10 {
				write(1)
			}

			// A single member refuses: it has no configuration to change.
			single := openT(t, Config{Dir: t.TempDir()}, &replSM{})
			if _, err := single.ChangeMembership(context.Background(), MembershipChange{Voters: []uint64{1, 2}}); !errors.Is(err, ErrNotReplicated) {
				t.Fatalf("single member: %v, want ErrNotReplicated", err)
			}
			// A follower refuses: the leader decides.
			l := c.leader()
			f := c.running(l)[0]
			active, _ := c.nodes[f].m.Membership()
			if _, err := c.nodes[f].m.ChangeMembership(context.Background(), MembershipChange{Voters: active.Voters,
				Observers: []uint64{4}, Addrs: map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d"}}); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("change on follower %d: %v, want ErrNotLeader", f, err)
			}

			// Add observer 4, then start it on an empty disk: it joins by
			// snapshot.
			c.addNode(4)
			conf := c.change("add observer 4", func(v, o []uint64) ([]uint64, []uint64) {
				if !slices.Contains(o, 4) {
					o = append(o, 4)
				}
				return v, o
			}, c.running()...)
			if conf.LastID != 4 || conf.Addrs[4] != c.addr(4) {
				t.Fatalf("configuration %s: last ID %d, addresses %v", conf.String(), conf.LastID, conf.Addrs)
			}
			c.start(4)
			eventually(t, "member 4 to observe", func() bool {
				st := c.nodes[4].m.Status()
				return st.Role == RoleObserver
			})
			write(4)
			c.converge(uint64(n))
			if c.nodes[4].sm.base == nil {
				t.Fatal("member 4 joined on an empty disk without a snapshot")
			}
			if got, _ := c.nodes[4].m.Membership(); got.Version != conf.Version {
				t.Fatalf("member 4 has configuration %s, want %s", got.String(), conf.String())
			}
			c.restartAll()
			c.leader()
			write(2)

			// Promote 4. With voters 1-4 a quorum is three: once two of the
			// first three are down, nothing commits without 4's vote.
			conf = c.change("promote 4", func(v, o []uint64) ([]uint64, []uint64) {
				if slices.Contains(o, 4) {
					v, o = append(v, 4), without(o, 4)
				}
				return v, o
			}, c.running()...)
			eventually(t, "member 4 to follow or lead", func() bool {
				r := c.nodes[4].m.Status().Role
				return r == RoleFollower || r == RoleLeader
			})
			c.restartAll()
			l = c.leader()
			down := without([]uint64{1, 2, 3}, l)[0]
			c.stop(down)
			write(4)
			c.start(down)
			c.leader()

			// Remove a follower: it says so, and stays removed across a
			// restart.
			l = c.leader()
			f = without([]uint64{1, 2, 3, 4}, l)[0]
			conf = c.change(fmt.Sprintf("remove follower %d", f), func(v, o []uint64) ([]uint64, []uint64) {
				return without(v, f), without(o, f)
			}, c.running(f)...)
			c.removed(f)
			write(l)
			c.restartAll()
			c.removed(f)
			c.leader(c.running(f)...)

			// Remove the leader: the others elect one of themselves.
			l = c.leader(c.running(f)...)
			rest := c.running(f, l)
			conf = c.change(fmt.Sprintf("remove leader %d", l), func(v, o []uint64) ([]uint64, []uint64) {
				return without(v, l), without(o, l)
			})
			c.removed(l)
			nl := c.leader(rest...)
			if nl == l || !slices.Contains(rest, nl) {
				t.Fatalf("leader %d after removing %d", nl, l)
			}
			write(nl)
			c.restartAll()
			c.removed(l)
			c.removed(f)
			c.leader(rest...)
			write(rest[0])
			for _, id := range rest {
				if got, _ := c.nodes[id].m.Membership(); got.Version < conf.Version || got.IsMember(l) || got.IsMember(f) {
					t.Fatalf("member %d has configuration %s after removing %d and %d", id, got.String(), f, l)
				}
			}
			// Every member, the removed ones included, applied the same
			// history as far as it got.
			var want []string
			for _, id := range rest {
				eventually(t, fmt.Sprintf("member %d to apply every write", id), func() bool {
					return c.nodes[id].m.Status().AppliedIndex >= c.nodes[rest[0]].m.Status().AppliedIndex
				})
			}
			want = c.nodes[rest[0]].sm.history()
			for _, id := range c.running() {
				got := c.nodes[id].sm.history()
				if !slices.Equal(got, want[:min(len(got), len(want))]) {
					t.Fatalf("member %d applied %q, member %d %q", id, got, rest[0], want)
				}
			}
		})
	}
}

// A single member started with its own peer address is the one voter of
// its ensemble and grows like any other: it applies its writes during
// their flush while alone, an observer joins it on an empty disk, is
// promoted, and the two then commit together, across restarts.
func TestSingleMemberGrows(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run(map[bool]string{false: "mem", true: "tcp"}[tcp], func(t *testing.T) {
			c := newCluster(t, 1, 0)
			if tcp {
				ports := testenv.FreePorts(t, 3)
				c.peers[1] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
				c.spare = ports[1:]
			}
			c.tweak = func(cfg *Config) {
				if tcp {
					cfg.Transport = nil
				}
				cfg.MaxDiffEntries = 4
				cfg.Join = cfg.ID > 1
			}
			c.startAll()
			if l := c.leader(); l != 1 {
				t.Fatalf("leader %d, want the single member 1", l)
			}
			n := 0
			write := func(on uint64) {
				t.Helper()
				n++
				c.propose(on, fmt.Sprintf("w%d", n))
			}
			for range 10 {
				write(1)
			}
			if c.nodes[1].sm.early.Load() == 0 {
				t.Fatal("the single member handed no write to its state machine before its flush")
			}

			c.addNode(2)
			c.change("add observer 2", func(v, o []uint64) ([]uint64, []uint64) {
				if !slices.Contains(o, 2) {
					o = append(o, 2)
				}
				return v, o
			}, 1)
			c.start(2)
			eventually(t, "member 2 to observe", func() bool { return c.nodes[2].m.Status().Role == RoleObserver })
			write(2)
			c.converge(uint64(n))
			if c.nodes[2].sm.base == nil {
				t.Fatal("member 2 joined on an empty disk without a snapshot")
			}

			conf := c.change("promote 2", func(v, o []uint64) ([]uint64, []uint64) {
				if slices.Contains(o, 2) {
					v, o = append(v, 2), without(o, 2)
				}
				return v, o
			}, 1, 2)
			if !slices.Equal(conf.Voters, []uint64{1, 2}) {
				t.Fatalf("configuration %s after promoting 2", conf.String())
			}
			eventually(t, "member 2 to follow or lead", func() bool {
				r := c.nodes[2].m.Status().Role
				return r == RoleFollower || r == RoleLeader
			})
			write(1)
			write(2)
			c.restartAll()
			l := c.leader()
			write(l)
			write(without([]uint64{1, 2}, l)[0])
			c.converge(uint64(n))
		})
	}
}

// removed waits until member id says it is removed, and checks that it
// takes no writes and that a wait for an index it will never apply ends
// at once with ErrRemoved.
func (c *cluster) removed(id uint64) {
	c.t.Helper()
	m := c.nodes[id].m
	eventually(c.t, fmt.Sprintf("member %d to say it is removed", id), func() bool {
		return m.Status().Role == RoleRemoved
	})
	if got := m.Status().Role.String(); got != "removed" {
		c.t.Fatalf("member %d reports role %q", id, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := m.Propose(ctx, []byte("to a removed member")); !errors.Is(err, ErrNoLeader) {
		c.t.Fatalf("proposal on removed member %d: %v, want ErrNoLeader", id, err)
	}
	// Entries handed to its applier before the removal are still applied
	// (a wait for the next one then ends with it); the wait for the one
	// after its last must end with ErrRemoved, not the deadline.
	var err error
	for err == nil {
		err = m.WaitApplied(ctx, m.Status().AppliedIndex+1)
	}
	if !errors.Is(err, ErrRemoved) {
		c.t.Fatalf("wait for an index after removed member %d's last: %v, want ErrRemoved", id, err)
	}
}
