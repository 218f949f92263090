package core_test

import (
	"reflect"
	"testing"

	"github.com/januskv/janus/core"
)

func authOp(c core.AuthChange) core.Op { return core.Op{Auth: &c} }

func perm(t core.AuthPermType, key, end string) core.AuthPerm {
	p := core.AuthPerm{Type: t, Key: []byte(key)}
	if end != "" {
		p.End = []byte(end)
	}
	return p
}

// TestAuthChangesFollowEtcd walks etcd's auth store rules step by step:
// each change's refusal code, whether it moves the auth revision, and that
// neither the op nor the Meta it leaves loses anything in its stored form.
func TestAuthChangesFollowEtcd(t *testing.T) {
	steps := []struct {
		name    string
		change  core.AuthChange
		code    core.Code
		bumpRev bool
	}{
		{"enable without root", core.AuthChange{Kind: core.AuthEnable}, core.CodeAuthRootUserNotExist, false},
		{"add root", core.AuthChange{Kind: core.AuthUserAdd, User: "root", Password: []byte("hash")}, core.CodeOK, true},
		{"add root twice", core.AuthChange{Kind: core.AuthUserAdd, User: "root"}, core.CodeAuthUserExists, false},
		{"add empty user", core.AuthChange{Kind: core.AuthUserAdd}, core.CodeAuthUserEmpty, false},
		{"enable without root role", core.AuthChange{Kind: core.AuthEnable}, core.CodeAuthRootRoleNotExist, false},
		{"grant missing role", core.AuthChange{Kind: core.AuthUserGrantRole, User: "root", Role: "r"}, core.CodeAuthRoleNotFound, false},
		{"grant root role", core.AuthChange{Kind: core.AuthUserGrantRole, User: "root", Role: "root"}, core.CodeOK, true},
		{"grant it again", core.AuthChange{Kind: core.AuthUserGrantRole, User: "root", Role: "root"}, core.CodeOK, false},
		{"add role", core.AuthChange{Kind: core.AuthRoleAdd, Role: "r"}, core.CodeOK, true},
		{"bad range", core.AuthChange{Kind: core.AuthRoleGrantPermission, Role: "r", Perm: perm(core.AuthRead, "b", "a")}, core.CodeAuthInvalidMgmt, false},
		{"grant prefix", core.AuthChange{Kind: core.AuthRoleGrantPermission, Role: "r", Perm: perm(core.AuthRead, "a/", "a0")}, core.CodeOK, true},
		{"revoke absent perm", core.AuthChange{Kind: core.AuthRoleRevokePermission, Role: "r", Perm: perm(core.AuthRead, "x", "")}, core.CodeAuthPermissionNotGranted, false},
		{"add user", core.AuthChange{Kind: core.AuthUserAdd, User: "u", Password: []byte("h")}, core.CodeOK, true},
		{"grant r", core.AuthChange{Kind: core.AuthUserGrantRole, User: "u", Role: "r"}, core.CodeOK, true},
		{"enable", core.AuthChange{Kind: core.AuthEnable, TokenKey: []byte("k")}, core.CodeOK, false},
		{"enable twice", core.AuthChange{Kind: core.AuthEnable, TokenKey: []byte("other")}, core.CodeOK, false},
		{"delete root", core.AuthChange{Kind: core.AuthUserDelete, User: "root"}, core.CodeAuthInvalidMgmt, false},
		{"revoke root role", core.AuthChange{Kind: core.AuthUserRevokeRole, User: "root", Role: "root"}, core.CodeAuthInvalidMgmt, false},
		{"revoke ungranted", core.AuthChange{Kind: core.AuthUserRevokeRole, User: "u", Role: "x"}, core.CodeAuthRoleNotGranted, false},
		{"delete role r", core.AuthChange{Kind: core.AuthRoleDelete, Role: "r"}, core.CodeOK, true},
		{"disable", core.AuthChange{Kind: core.AuthDisable}, core.CodeOK, true},
		{"delete root when off", core.AuthChange{Kind: core.AuthUserDelete, User: "root"}, core.CodeOK, true},
	}
	h := newHarness(t)
	h.txn(put("a", "1"))
	rev := h.rev()
	for _, s := range steps {
		op := authOp(s.change)
		dec, err := core.DecodeOp(core.EncodeOp(&op))
		if err != nil || !reflect.DeepEqual(dec, &op) {
			t.Fatalf("%s: op round trip: %+v, %v", s.name, dec, err)
		}
		before, _ := h.m.Meta()
		res, b := h.apply(*dec)
		wantCode(t, res, s.code)
		if b.Changed || h.rev() != rev {
			t.Fatalf("%s: an auth change moved the revision to %d", s.name, h.rev())
		}
		m, _ := h.m.Meta()
		if got, want := m.AuthState().Rev, before.AuthState().Rev; (got == want+1) != s.bumpRev || (got != want && got != want+1) {
			t.Fatalf("%s: auth revision %d -> %d, want a bump: %v", s.name, want, got, s.bumpRev)
		}
		// Empty and nil slices may differ after a round trip; the
		// stored forms, which hashes compare, may not.
		back, err := core.DecodeMeta(core.AppendMeta(nil, m))
		if err != nil || back.AuthState().Rev != m.AuthState().Rev || string(core.AppendMeta(nil, back)) != string(core.AppendMeta(nil, m)) {
			t.Fatalf("%s: meta round trip: %+v, %v", s.name, back, err)
		}
	}
	m, _ := h.m.Meta()
	s := m.AuthState()
	if s.Enabled || len(s.Users) != 1 || s.Users[0].Name != "u" || len(s.Users[0].Roles) != 0 || len(s.Roles) != 0 {
		t.Fatalf("final auth state %+v", s)
	}
}

// TestAuthPermittedCoversRanges checks etcd's range rules: a point needs
// one permission touching it, a range needs the union of the user's
// permissions of that type to cover all of it.
func TestAuthPermittedCoversRanges(t *testing.T) {
	s := &core.AuthState{
		Enabled: true, Rev: 5,
		Users: []core.AuthUser{
			{Name: "admin", Roles: []string{"root"}},
			{Name: "u", Roles: []string{"a", "b"}},
		},
		Roles: []core.AuthRole{
			{Name: "a", Perms: []core.AuthPerm{perm(core.AuthRead, "k", ""), perm(core.AuthReadWrite, "p/", "p0")}},
			{Name: "b", Perms: []core.AuthPerm{perm(core.AuthRead, "p0", "q"), perm(core.AuthWrite, "w", "\x00")}},
		},
	}
	cases := []struct {
		user, key, end string
		typ            core.AuthPermType
		want           bool
	}{
		{"admin", "anything", "", core.AuthWrite, true},
		{"nobody", "k", "", core.AuthRead, false},
		{"u", "k", "", core.AuthRead, true},
		{"u", "k", "", core.AuthWrite, false},
		{"u", "k", "k\x00", core.AuthRead, true},
		{"u", "k", "l", core.AuthRead, false},
		{"u", "p/x", "", core.AuthWrite, true},
		{"u", "p/", "p0", core.AuthWrite, true},
		{"u", "p/", "q", core.AuthRead, true}, // two roles' ranges join at p0
		{"u", "p/", "q", core.AuthWrite, false},
		{"u", "p/", "q\x00", core.AuthRead, false},
		{"u", "w", "\x00", core.AuthWrite, true},
		{"u", "wz", "", core.AuthWrite, true},
		{"u", "w", "\x00", core.AuthRead, false},
		{"u", "a", "\x00", core.AuthWrite, false},
		// Empty and inverted ranges: permitted when their start is, as
		// etcd's interval tree has it.
		{"u", "p/x", "p/", core.AuthRead, true},
		{"u", "k", "k", core.AuthRead, true},
		{"u", "kk", "k", core.AuthRead, false},
	}
	for _, c := range cases {
		var end []byte
		if c.end != "" {
			end = []byte(c.end)
		}
		if got := s.Permitted(c.user, []byte(c.key), end, c.typ); got != c.want {
			t.Errorf("Permitted(%s, %q, %q, %d) = %v, want %v", c.user, c.key, c.end, c.typ, got, c.want)
		}
	}
}

// TestStaleAuthCheckIsRefused: an op checked against an older auth
// revision, or while auth was off, is refused once auth is on.
func TestStaleAuthCheckIsRefused(t *testing.T) {
	h := newHarness(t)
	for _, c := range []core.AuthChange{
		{Kind: core.AuthUserAdd, User: "root", Password: []byte("h")},
		{Kind: core.AuthUserGrantRole, User: "root", Role: "root"},
	} {
		res, _ := h.apply(authOp(c))
		wantCode(t, res, core.CodeOK)
	}
	m, _ := h.m.Meta()
	rev := m.AuthState().Rev
	put1 := &core.Txn{Success: []core.TxnOp{put("a", "1")}}
	// Auth off: any check passes, even one at an older revision.
	res, _ := h.apply(core.Op{Txn: put1, AuthCheck: &core.AuthCheck{Rev: rev - 1}})
	wantCode(t, res, core.CodeOK)
	res, _ = h.apply(authOp(core.AuthChange{Kind: core.AuthEnable}))
	wantCode(t, res, core.CodeOK)
	for _, c := range []struct {
		check *core.AuthCheck
		code  core.Code
	}{
		{&core.AuthCheck{Rev: rev, Enabled: false}, core.CodeAuthUserEmpty},
		{&core.AuthCheck{Rev: rev - 1, Enabled: true}, core.CodeAuthOldRevision},
		{&core.AuthCheck{Rev: rev, Enabled: true}, core.CodeOK},
		{nil, core.CodeOK},
	} {
		op := core.Op{Txn: put1, AuthCheck: c.check}
		dec, err := core.DecodeOp(core.EncodeOp(&op))
		if err != nil || !reflect.DeepEqual(dec, &op) {
			t.Fatalf("op round trip: %+v, %v", dec, err)
		}
		res, _ := h.apply(*dec)
		wantCode(t, res, c.code)
	}
}

// TestAuthEnableKeysAKeylessStore: a store that is enabled but has no
// token signing key (restored from an etcd backup, which keeps none) takes
// the key of the next enable, once; after that enabling changes nothing,
// so members that race to key it agree on the first key logged.
func TestAuthEnableKeysAKeylessStore(t *testing.T) {
	h := newHarness(t)
	for _, c := range []core.AuthChange{
		{Kind: core.AuthUserAdd, User: "root", Password: []byte("hash")},
		{Kind: core.AuthUserGrantRole, User: "root", Role: "root"},
		{Kind: core.AuthEnable}, // enabled, no key: the restored shape
	} {
		res, _ := h.apply(authOp(c))
		wantCode(t, res, core.CodeOK)
	}
	key := func() string {
		m, _ := h.m.Meta()
		return string(m.AuthState().TokenKey)
	}
	before, _ := h.m.Meta()
	for _, step := range []struct {
		key, want string
	}{
		{"", ""}, // an enable without a key leaves it keyless
		{"first", "first"},
		{"second", "first"},
	} {
		res, _ := h.apply(authOp(core.AuthChange{Kind: core.AuthEnable, TokenKey: []byte(step.key)}))
		wantCode(t, res, core.CodeOK)
		if got := key(); got != step.want {
			t.Fatalf("after enable with key %q the store's key is %q, want %q", step.key, got, step.want)
		}
	}
	after, _ := h.m.Meta()
	if after.AuthState().Rev != before.AuthState().Rev || !after.AuthState().Enabled {
		t.Fatalf("keying moved the auth revision %d -> %d or disabled auth", before.AuthState().Rev, after.AuthState().Rev)
	}
}
