package etcdapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/januskv/janus/core"
)

// step is one read of a token in TestSimpleTokenExpiresFromLastUse.
type step struct {
	what   string
	member int // which member's provider reads the token
	at     time.Duration
	valid  bool
}

// TestSimpleTokenExpiresFromLastUse drives simple tokens with explicit
// times (no clock, no sleeping): a token used within the TTL of its last
// use stays valid however old it is, one left idle for the TTL is gone,
// and a token another member issued is taken only within its first TTL.
func TestSimpleTokenExpiresFromLastUse(t *testing.T) {
	const ttl = time.Minute
	st := &core.AuthState{Enabled: true, Rev: 7, TokenKey: []byte("0123456789abcdef0123456789abcdef")}
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"kept alive by use", keptAlive(ttl)},
		{"idle for the TTL", []step{
			{"used once", 0, ttl / 2, true},
			{"exactly TTL after that use", 0, ttl/2 + ttl, false},
			{"and not back afterwards", 0, ttl/2 + ttl - time.Second, false},
		}},
		{"never used", []step{
			{"at issue+TTL", 0, ttl, false},
		}},
		{"another member, within the first TTL", []step{
			{"first use there", 1, ttl - time.Second, true},
			{"kept alive there from then on", 1, 2*ttl - 2*time.Second, true},
			{"while the issuer, idle, has let it go", 0, 2*ttl - 2*time.Second, false},
		}},
		{"another member, after the first TTL", []step{
			{"first use there", 1, ttl + time.Second, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := []*simpleTokens{newSimpleTokens(ttl), newSimpleTokens(ttl)}
			token, err := members[0].assign(st, "alice", t0)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.steps {
				user, rev, ok := members[s.member].info(st, token, at(s.at))
				if ok != s.valid {
					t.Fatalf("%s (member %d, issue+%v): valid=%v, want %v", s.what, s.member, s.at, ok, s.valid)
				}
				if ok && (user != "alice" || rev != 7) {
					t.Fatalf("%s: token names %q at rev %d, want alice at 7", s.what, user, rev)
				}
			}
		})
	}
}

// keptAlive uses a token just before each TTL runs out, ten times, then
// leaves it idle.
func keptAlive(ttl time.Duration) []step {
	var steps []step
	var last time.Duration
	for i := range 10 {
		last += ttl - time.Millisecond
		steps = append(steps, step{fmt.Sprintf("use %d, TTL-1ms after the one before", i+1), 0, last, true})
	}
	return append(steps, step{"idle for the TTL after ten TTLs of use", 0, last + ttl, false})
}

// TestSimpleTokensForgetIdleOnes checks that the deadlines kept for
// tokens do not grow without bound: tokens idle past their TTL are swept
// by later calls.
func TestSimpleTokensForgetIdleOnes(t *testing.T) {
	const ttl = time.Minute
	st := &core.AuthState{Enabled: true, Rev: 1, TokenKey: []byte("k")}
	p := newSimpleTokens(ttl)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		if _, err := p.assign(st, "u", t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	live, err := p.assign(st, "u", t0.Add(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := p.info(st, live, t0.Add(2*ttl+time.Second)); ok {
		t.Fatalf("a token idle for more than its TTL is still valid")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.deadline); n != 0 {
		t.Fatalf("%d idle tokens still kept after two TTLs, want 0", n)
	}
}
