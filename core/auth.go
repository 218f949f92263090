package core

import (
	"bytes"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/pkg/v3/adt"
)

// etcd's authentication store (users, roles, key-range permissions, the
// enabled flag and the auth revision) is replicated state: it lives in Meta,
// changes only through AuthChange entries, and Apply changes it
// deterministically. Passwords reach the log already hashed (bcrypt runs in
// the face, before proposing). Permission checks run in the etcd face
// against the member's applied AuthState; the face stamps the auth revision
// it checked against on the op (AuthCheck) so that Apply refuses the op,
// alike on every member, when the auth state changed in between.

// RootName is the name of etcd's root user and of its root role: a user
// with the root role may do anything, and auth cannot be enabled without a
// root user that has it.
const RootName = "root"

// AuthPermType is etcd's authpb.Permission_Type: the values are etcd's.
type AuthPermType uint8

const (
	AuthRead AuthPermType = iota
	AuthWrite
	AuthReadWrite
)

// AuthPerm grants Type on the key Key (End empty), on [Key, End), or on
// every key from Key on (End "\x00"), as etcd's authpb.Permission does.
type AuthPerm struct {
	Type AuthPermType
	Key  []byte
	End  []byte
}

// AuthUser is one etcd user. Password is the bcrypt hash, nil for a user
// created with no password (it may only authenticate by certificate).
type AuthUser struct {
	Name       string
	Password   []byte
	NoPassword bool
	Roles      []string // sorted
}

// AuthRole is one etcd role and its key permissions, sorted by Key as
// etcd keeps them.
type AuthRole struct {
	Name  string
	Perms []AuthPerm
}

// AuthState is the whole auth store. The zero value of a brand-new store
// is what Meta.AuthState returns when nothing was ever configured: auth
// disabled, revision 1 (etcd starts its auth revision at 1).
type AuthState struct {
	Enabled bool
	// Rev is etcd's auth revision: it grows with every change of users,
	// roles, permissions and with auth disable (not with enable, as in
	// etcd). A token or a check made at an older revision no longer acts.
	Rev uint64
	// TokenKey signs the simple tokens any member may verify; the proposer
	// of auth enable draws it, so it is fresh for every enable.
	TokenKey []byte
	Users    []AuthUser // sorted by name
	Roles    []AuthRole // sorted by name

	// perms caches each user's merged permissions (see merged).
	mu    sync.Mutex
	perms map[string][2]adt.IntervalTree
}

// AuthState returns the auth store m holds, or the one of a brand-new
// store. The result belongs to m: callers must not modify it.
func (m Meta) AuthState() *AuthState {
	if m.Auth == nil {
		return &AuthState{Rev: 1}
	}
	return m.Auth
}

// Clone returns a deep copy.
func (s *AuthState) Clone() *AuthState {
	c := &AuthState{Enabled: s.Enabled, Rev: s.Rev, TokenKey: bytes.Clone(s.TokenKey)}
	c.Users = make([]AuthUser, len(s.Users))
	for i, u := range s.Users {
		c.Users[i] = AuthUser{Name: u.Name, Password: bytes.Clone(u.Password), NoPassword: u.NoPassword, Roles: slices.Clone(u.Roles)}
	}
	c.Roles = make([]AuthRole, len(s.Roles))
	for i, r := range s.Roles {
		c.Roles[i] = AuthRole{Name: r.Name, Perms: make([]AuthPerm, len(r.Perms))}
		for j, p := range r.Perms {
			c.Roles[i].Perms[j] = AuthPerm{Type: p.Type, Key: bytes.Clone(p.Key), End: bytes.Clone(p.End)}
		}
	}
	return c
}

// User returns the named user, or nil.
func (s *AuthState) User(name string) *AuthUser {
	i, ok := slices.BinarySearchFunc(s.Users, name, func(u AuthUser, n string) int { return strings.Compare(u.Name, n) })
	if !ok {
		return nil
	}
	return &s.Users[i]
}

// Role returns the named role, or nil.
func (s *AuthState) Role(name string) *AuthRole {
	i, ok := slices.BinarySearchFunc(s.Roles, name, func(r AuthRole, n string) int { return strings.Compare(r.Name, n) })
	if !ok {
		return nil
	}
	return &s.Roles[i]
}

// IsRoot reports whether the user exists and has the root role.
func (s *AuthState) IsRoot(user string) bool {
	u := s.User(user)
	return u != nil && slices.Contains(u.Roles, RootName)
}

// HasRole reports whether the user has the role.
func (s *AuthState) HasRole(user, role string) bool {
	u := s.User(user)
	return u != nil && slices.Contains(u.Roles, role)
}

// Permitted reports whether user may read (AuthRead) or write (AuthWrite)
// the key (end empty) or every key of [key, end) (end "\x00": from key on),
// as etcd decides it: a root user may do anything; otherwise the union of
// the user's roles' permissions of that type must cover the whole range.
//
// The union is etcd's own interval tree (package adt), built as etcd builds
// it: for an empty or inverted range etcd's answer depends on the tree's
// shape, and a client sees that answer, so Janus computes the same one.
func (s *AuthState) Permitted(user string, key, end []byte, want AuthPermType) bool {
	u := s.User(user)
	if u == nil {
		return false
	}
	if slices.Contains(u.Roles, RootName) {
		return true
	}
	t := s.merged(u)[want]
	if len(end) == 0 {
		return t.Intersects(adt.NewBytesAffinePoint(key))
	}
	if len(end) == 1 && end[0] == 0 {
		end = nil // from key on: the affine comparison's infinity
	}
	return t.Contains(adt.NewBytesAffineInterval(key, end))
}

// merged returns the user's permissions by type (AuthRead, AuthWrite) as
// etcd's getMergedPerms builds them, cached: an AuthState never changes
// once Apply has made it.
func (s *AuthState) merged(u *AuthUser) [2]adt.IntervalTree {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.perms[u.Name]; ok {
		return t
	}
	t := [2]adt.IntervalTree{adt.NewIntervalTree(), adt.NewIntervalTree()}
	for _, rn := range u.Roles {
		r := s.Role(rn)
		if r == nil {
			continue
		}
		for _, p := range r.Perms {
			end := p.End
			if len(end) == 1 && end[0] == 0 {
				end = nil
			}
			ivl := adt.NewBytesAffinePoint(p.Key)
			if len(p.End) != 0 {
				ivl = adt.NewBytesAffineInterval(p.Key, end)
			}
			if p.Type == AuthRead || p.Type == AuthReadWrite {
				t[AuthRead].Insert(ivl, struct{}{})
			}
			if p.Type == AuthWrite || p.Type == AuthReadWrite {
				t[AuthWrite].Insert(ivl, struct{}{})
			}
		}
	}
	if s.perms == nil {
		s.perms = map[string][2]adt.IntervalTree{}
	}
	s.perms[u.Name] = t
	return t
}

// EtcdScheme is the ZooKeeper ACL scheme of etcd users: an etcd user acts
// on znodes as etcd:<user>, and a ZooKeeper session that authenticated
// with an etcd user's password does too.
const EtcdScheme = "etcd"

// ZKPermitted applies etcd's role permissions to a ZooKeeper request by a
// session with identities auth on the znode at key, as the other half of
// one permission model: with etcd auth enabled, a key some role's
// permission covers (of any type) is read (perm with READ) or changed
// (any other perm) only by a session that has the etcd identity of a user
// with that right (or a super identity). Keys no role names, and every
// key while etcd auth is off, are left to the ACLs alone. A nil auth (an
// etcd request, checked by its own face) is not subject to it.
func (s *AuthState) ZKPermitted(key []byte, perm Perm, auth []ID) bool {
	if !s.Enabled || auth == nil || !s.covered(key) {
		return true
	}
	want := AuthWrite
	if perm&PermRead != 0 {
		want = AuthRead
	}
	for _, id := range auth {
		switch {
		case id.Scheme == "super":
			return true
		case id.Scheme == EtcdScheme && s.Permitted(id.ID, key, nil, want):
			return true
		}
	}
	return false
}

// covered reports whether any role's permission names key.
func (s *AuthState) covered(key []byte) bool {
	for _, r := range s.Roles {
		for _, p := range r.Perms {
			if permCovers(p, key) {
				return true
			}
		}
	}
	return false
}

// permCovers reports whether a permission's range holds key.
func permCovers(p AuthPerm, key []byte) bool {
	switch {
	case len(p.End) == 0:
		return bytes.Equal(p.Key, key)
	case len(p.End) == 1 && p.End[0] == 0:
		return bytes.Compare(key, p.Key) >= 0
	}
	return bytes.Compare(key, p.Key) >= 0 && bytes.Compare(key, p.End) < 0
}

// AuthChangeKind names one auth management request.
type AuthChangeKind uint8

const (
	AuthEnable AuthChangeKind = iota + 1
	AuthDisable
	AuthUserAdd
	AuthUserDelete
	AuthUserChangePassword
	AuthUserGrantRole
	AuthUserRevokeRole
	AuthRoleAdd
	AuthRoleDelete
	AuthRoleGrantPermission
	AuthRoleRevokePermission
)

// AuthChange is one auth management request, as etcd's Auth service
// takes it, with the password already hashed.
type AuthChange struct {
	Kind       AuthChangeKind
	User       string
	Role       string
	Password   []byte // bcrypt hash (UserAdd, UserChangePassword)
	NoPassword bool   // UserAdd
	Perm       AuthPerm
	TokenKey   []byte // Enable
}

// AuthCheck records the auth state a face checked an op's permissions
// against. Apply refuses the op when auth is enabled now and was not then
// (CodeAuthUserEmpty), or when the auth revision has moved on since
// (CodeAuthOldRevision): a permission revoked in between never acts.
type AuthCheck struct {
	Rev     uint64
	Enabled bool
}

// stale returns Apply's refusal of an op checked as c against the state s.
func (s *AuthState) stale(c *AuthCheck) error {
	switch {
	case c == nil || !s.Enabled:
		return nil
	case !c.Enabled:
		return errCode(CodeAuthUserEmpty, nil)
	case c.Rev < s.Rev:
		return errCode(CodeAuthOldRevision, nil)
	}
	return nil
}

// maxAuthBytes bounds the encoded auth store, which lives in the Meta
// record: it leaves room for the rest of Meta within MaxRecordBytes.
const maxAuthBytes = MaxRecordBytes - 1<<20

// authChange applies c, etcd's auth store semantics, to a copy of the
// state and returns it, or a refusal. changed is false for a request etcd
// accepts without changing anything (enabling auth twice, granting a role
// the user has).
func authChange(cur *AuthState, c *AuthChange) (next *AuthState, changed bool, refused error) {
	s := cur.Clone()
	fail := func(code Code) (*AuthState, bool, error) { return nil, false, errCode(code, nil) }
	switch c.Kind {
	case AuthEnable:
		if s.Enabled {
			// An auth store restored from an etcd backup is enabled
			// but has no key to sign simple tokens with (etcd keeps
			// none): the first enable proposed then supplies one.
			// Otherwise enabling twice changes nothing, as in etcd.
			if len(s.TokenKey) > 0 || len(c.TokenKey) == 0 {
				return cur, false, nil
			}
			s.TokenKey = bytes.Clone(c.TokenKey)
			return s, true, nil
		}
		root := s.User(RootName)
		if root == nil {
			return fail(CodeAuthRootUserNotExist)
		}
		if !slices.Contains(root.Roles, RootName) {
			return fail(CodeAuthRootRoleNotExist)
		}
		s.Enabled, s.TokenKey = true, bytes.Clone(c.TokenKey)
		return s, true, nil // etcd keeps the revision on enable
	case AuthDisable:
		if !s.Enabled {
			return cur, false, nil
		}
		s.Enabled, s.TokenKey = false, nil
	case AuthUserAdd:
		if c.User == "" {
			return fail(CodeAuthUserEmpty)
		}
		if s.User(c.User) != nil {
			return fail(CodeAuthUserExists)
		}
		u := AuthUser{Name: c.User, NoPassword: c.NoPassword}
		if !c.NoPassword {
			u.Password = bytes.Clone(c.Password)
		}
		i, _ := slices.BinarySearchFunc(s.Users, c.User, func(u AuthUser, n string) int { return strings.Compare(u.Name, n) })
		s.Users = slices.Insert(s.Users, i, u)
	case AuthUserDelete:
		if s.Enabled && c.User == RootName {
			return fail(CodeAuthInvalidMgmt)
		}
		if s.User(c.User) == nil {
			return fail(CodeAuthUserNotFound)
		}
		s.Users = slices.DeleteFunc(s.Users, func(u AuthUser) bool { return u.Name == c.User })
	case AuthUserChangePassword:
		u := s.User(c.User)
		if u == nil {
			return fail(CodeAuthUserNotFound)
		}
		if !u.NoPassword {
			u.Password = bytes.Clone(c.Password)
		}
	case AuthUserGrantRole:
		u := s.User(c.User)
		if u == nil {
			return fail(CodeAuthUserNotFound)
		}
		if c.Role != RootName && s.Role(c.Role) == nil {
			return fail(CodeAuthRoleNotFound)
		}
		i, found := slices.BinarySearch(u.Roles, c.Role)
		if found {
			return cur, false, nil
		}
		u.Roles = slices.Insert(u.Roles, i, c.Role)
	case AuthUserRevokeRole:
		if s.Enabled && c.User == RootName && c.Role == RootName {
			return fail(CodeAuthInvalidMgmt)
		}
		u := s.User(c.User)
		if u == nil {
			return fail(CodeAuthUserNotFound)
		}
		i, found := slices.BinarySearch(u.Roles, c.Role)
		if !found {
			return fail(CodeAuthRoleNotGranted)
		}
		u.Roles = slices.Delete(u.Roles, i, i+1)
	case AuthRoleAdd:
		if c.Role == "" {
			return fail(CodeAuthRoleEmpty)
		}
		if s.Role(c.Role) != nil {
			return fail(CodeAuthRoleExists)
		}
		i, _ := slices.BinarySearchFunc(s.Roles, c.Role, func(r AuthRole, n string) int { return strings.Compare(r.Name, n) })
		s.Roles = slices.Insert(s.Roles, i, AuthRole{Name: c.Role})
	case AuthRoleDelete:
		if s.Enabled && c.Role == RootName {
			return fail(CodeAuthInvalidMgmt)
		}
		if s.Role(c.Role) == nil {
			return fail(CodeAuthRoleNotFound)
		}
		s.Roles = slices.DeleteFunc(s.Roles, func(r AuthRole) bool { return r.Name == c.Role })
		for i := range s.Users {
			s.Users[i].Roles = slices.DeleteFunc(s.Users[i].Roles, func(r string) bool { return r == c.Role })
		}
	case AuthRoleGrantPermission:
		if !validPermRange(c.Perm.Key, c.Perm.End) || c.Perm.Type > AuthReadWrite {
			return fail(CodeAuthInvalidMgmt)
		}
		r := s.Role(c.Role)
		if r == nil {
			return fail(CodeAuthRoleNotFound)
		}
		p := AuthPerm{Type: c.Perm.Type, Key: bytes.Clone(c.Perm.Key), End: bytes.Clone(c.Perm.End)}
		i := slices.IndexFunc(r.Perms, func(q AuthPerm) bool { return bytes.Equal(q.Key, p.Key) && bytes.Equal(q.End, p.End) })
		if i >= 0 {
			r.Perms[i].Type = p.Type
			break
		}
		// etcd inserts after every permission with a smaller key.
		j, _ := slices.BinarySearchFunc(r.Perms, p.Key, func(q AuthPerm, k []byte) int {
			if bytes.Compare(q.Key, k) < 0 {
				return -1
			}
			return 1
		})
		r.Perms = slices.Insert(r.Perms, j, p)
	case AuthRoleRevokePermission:
		r := s.Role(c.Role)
		if r == nil {
			return fail(CodeAuthRoleNotFound)
		}
		n := len(r.Perms)
		r.Perms = slices.DeleteFunc(r.Perms, func(q AuthPerm) bool { return bytes.Equal(q.Key, c.Perm.Key) && bytes.Equal(q.End, c.Perm.End) })
		if len(r.Perms) == n {
			return fail(CodeAuthPermissionNotGranted)
		}
	default:
		return fail(CodeBadArguments)
	}
	s.Rev++
	if len(appendAuth(nil, s)) > maxAuthBytes {
		return fail(CodeTooLarge)
	}
	return s, true, nil
}

// validPermRange is etcd's isValidPermissionRange.
func validPermRange(key, end []byte) bool {
	if len(key) == 0 {
		return false
	}
	if len(end) == 0 || bytes.Compare(key, end) < 0 {
		return true
	}
	return len(end) == 1 && end[0] == 0
}
