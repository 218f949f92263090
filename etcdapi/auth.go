package etcdapi

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/januskv/janus/core"
)

// caller is who a request acts as, and the auth state its permissions
// were checked against.
type caller struct {
	st   *core.AuthState
	user string
	// rev is the auth revision the caller's credentials were issued at
	// (a token's), or the state's for a certificate; 0 for no user.
	rev uint64
}

// caller identifies the request's user the way etcd does: a token in the
// "token" (or "authorization") metadata, else, under --client-cert-auth,
// the common name of the verified client certificate. With auth disabled
// everyone may do anything.
func (s *Server) caller(ctx context.Context) (*caller, error) {
	st := s.b.Auth()
	c := &caller{st: st}
	if !st.Enabled {
		return c, nil
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ts := md.Get(rpctypes.TokenFieldNameGRPC)
		if len(ts) == 0 {
			ts = md.Get(rpctypes.TokenFieldNameSwagger)
		}
		if len(ts) > 0 {
			token := strings.TrimPrefix(ts[0], "Bearer ")
			user, rev, ok := s.tokens.info(st, token, time.Now())
			if !ok {
				s.log.Warn("invalid auth token", "peer", peerAddr(ctx))
				return nil, rpctypes.ErrGRPCInvalidAuthToken
			}
			c.user, c.rev = user, rev
			return c, nil
		}
	}
	if s.cfg.ClientCertAuth {
		if cn := certCommonName(ctx); cn != "" {
			c.user, c.rev = cn, st.Rev
		}
	}
	return c, nil
}

// certCommonName is the common name of the client's verified certificate,
// which etcd takes as the user under --client-cert-auth; "" without one.
// A request relayed by the JSON gateway carries the gateway's own
// certificate, which names no user (etcd ignores it the same way).
func certCommonName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ""
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("grpcgateway-accept")) > 0 {
		return ""
	}
	for _, chain := range info.State.VerifiedChains {
		if len(chain) > 0 {
			return commonName(chain[0])
		}
	}
	return ""
}

func commonName(c *x509.Certificate) string { return c.Subject.CommonName }

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// check is the AuthCheck a proposal carries: Apply refuses it if the auth
// state changed since these permissions were checked.
func (c *caller) check() *core.AuthCheck {
	return &core.AuthCheck{Rev: c.st.Rev, Enabled: c.st.Enabled}
}

// authorized refuses a caller without a user, or with credentials issued
// before the last change of the auth store, as etcd's isOpPermitted does.
func (c *caller) authorized() error {
	switch {
	case c.user == "" || c.rev == 0:
		return rpctypes.ErrGRPCUserEmpty
	case c.rev < c.st.Rev:
		return rpctypes.ErrGRPCAuthOldRevision
	}
	return nil
}

// may checks a read (core.AuthRead) or write of the key (end empty) or
// range.
func (c *caller) may(key, end []byte, typ core.AuthPermType) error {
	if !c.st.Enabled {
		return nil
	}
	if err := c.authorized(); err != nil {
		return err
	}
	if !c.st.Permitted(c.user, key, end, typ) {
		return rpctypes.ErrGRPCPermissionDenied
	}
	return nil
}

// root checks that the caller has the root role (etcd's
// IsAdminPermitted).
func (c *caller) root() error {
	if !c.st.Enabled {
		return nil
	}
	if c.user == "" {
		return rpctypes.ErrGRPCUserEmpty
	}
	if c.st.User(c.user) == nil {
		return rpctypes.ErrGRPCUserNotFound
	}
	if !c.st.IsRoot(c.user) {
		return rpctypes.ErrGRPCPermissionDenied
	}
	return nil
}

// zkAuth is the ZooKeeper identity the caller's etcd ops carry into the
// core (core.Txn.Auth): etcd:<user> (core.EtcdScheme), so a ZooKeeper ACL
// can grant or deny etcd users as it does ZooKeeper clients; nil, checking
// no ACLs, with auth off or for root (ZooKeeper's super).
func (c *caller) zkAuth() []core.ID {
	if c.isRoot() {
		return nil
	}
	return []core.ID{{Scheme: core.EtcdScheme, ID: c.user}}
}

// setZKAuth gives t and every Txn nested in it the caller's ZooKeeper
// identity (see zkAuth).
func (c *caller) setZKAuth(t *core.Txn) {
	auth := c.zkAuth()
	var walk func(t *core.Txn)
	walk = func(t *core.Txn) {
		t.Auth = auth
		for _, ops := range [][]core.TxnOp{t.Success, t.Failure} {
			for i := range ops {
				if ops[i].Kind == core.OpTxn && ops[i].Txn != nil {
					walk(ops[i].Txn)
				}
			}
		}
	}
	walk(t)
}

// isRoot says whether the caller may do anything: auth is off, or it is a
// root user.
func (c *caller) isRoot() bool { return !c.st.Enabled || c.st.IsRoot(c.user) }

// known refuses a caller without a user when auth is on (etcd's
// requireAuthInfo, for Status and listing alarms).
func (c *caller) known() error {
	if c.st.Enabled && c.user == "" {
		return rpctypes.ErrGRPCUserEmpty
	}
	return nil
}

// requireRoot refuses a request whose caller is not root while auth is
// on: etcd's admin-only RPCs (maintenance, membership, compaction).
func (s *Server) requireRoot(ctx context.Context) error {
	c, err := s.caller(ctx)
	if err != nil {
		return err
	}
	return c.root()
}

// RootToken reports whether token (an Authenticate answer, bare or as
// "Bearer <token>") acts as a root user now: valid, issued at the current
// auth revision, for a user with the root role. Other faces use it for
// requests that cannot go through gRPC (the ZooKeeper admin commands).
func (s *Server) RootToken(token string) bool {
	st := s.b.Auth()
	if !st.Enabled {
		return false
	}
	user, rev, ok := s.tokens.info(st, strings.TrimPrefix(token, "Bearer "), time.Now())
	c := &caller{st: st, user: user, rev: rev}
	return ok && c.authorized() == nil && st.IsRoot(user)
}

// requireUser refuses a request that names no user while auth is on.
func (s *Server) requireUser(ctx context.Context) error {
	c, err := s.caller(ctx)
	if err != nil {
		return err
	}
	return c.known()
}

// ops checks etcd's permissions for the ops of a Txn branch: read for
// ranges, write for puts and deletes (read too with prev_kv), and the
// keys already on a put's lease.
func (c *caller) ops(leases leaseKeys, ops []*pb.RequestOp) error {
	for _, op := range ops {
		var err error
		switch {
		case op.GetRequestRange() != nil:
			r := op.GetRequestRange()
			err = c.may(r.Key, r.RangeEnd, core.AuthRead)
		case op.GetRequestPut() != nil:
			err = c.put(leases, op.GetRequestPut())
		case op.GetRequestDeleteRange() != nil:
			err = c.del(op.GetRequestDeleteRange())
		case op.GetRequestTxn() != nil:
			err = c.txn(leases, op.GetRequestTxn())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *caller) txn(leases leaseKeys, r *pb.TxnRequest) error {
	for _, cmp := range r.Compare {
		if err := c.may(cmp.Key, cmp.RangeEnd, core.AuthRead); err != nil {
			return err
		}
	}
	if err := c.ops(leases, r.Success); err != nil {
		return err
	}
	return c.ops(leases, r.Failure)
}

func (c *caller) put(leases leaseKeys, r *pb.PutRequest) error {
	if err := c.may(r.Key, nil, core.AuthWrite); err != nil {
		return err
	}
	if r.Lease != 0 {
		// A lease already holding a key this user may not write is one
		// it could not revoke: it may not attach more to it.
		if err := c.leaseWritable(leases, r.Lease); err != nil {
			return err
		}
	}
	if r.PrevKv {
		return c.may(r.Key, nil, core.AuthRead)
	}
	return nil
}

func (c *caller) del(r *pb.DeleteRangeRequest) error {
	if r.PrevKv {
		if err := c.may(r.Key, r.RangeEnd, core.AuthRead); err != nil {
			return err
		}
	}
	return c.may(r.Key, r.RangeEnd, core.AuthWrite)
}

// leaseKeys lists the keys attached to a lease.
type leaseKeys func(id int64) ([][]byte, error)

func (c *caller) leaseWritable(leases leaseKeys, id int64) error {
	if c.isRoot() {
		return nil
	}
	keys, err := leases(id)
	if err != nil {
		return grpcError(err)
	}
	for _, k := range keys {
		if err := c.may(k, nil, core.AuthWrite); err != nil {
			return err
		}
	}
	return nil
}

// leaseKeysOf reads the keys of a lease from the latest state.
func (s *Server) leaseKeysOf(ctx context.Context) leaseKeys {
	return func(id int64) ([][]byte, error) {
		v, err := s.b.Read(ctx, 0)
		if err != nil {
			return nil, err
		}
		defer v.Close()
		var keys [][]byte
		err = v.LeaseKeys(id, func(k []byte) bool {
			keys = append(keys, append([]byte(nil), k...))
			return true
		})
		return keys, err
	}
}

// stillCurrent is etcd's last step of a read served outside the log: if
// the auth store changed while it ran, the answer is withheld.
func (c *caller) stillCurrent(s *Server) error {
	if c.st.Enabled && s.b.Auth().Rev != c.st.Rev {
		return rpctypes.ErrGRPCAuthOldRevision
	}
	return nil
}

// forwardToken copies the caller's token onto the in-process client's
// requests, so the lock and election services act as their caller does.
func forwardToken(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	for _, k := range []string{rpctypes.TokenFieldNameGRPC, rpctypes.TokenFieldNameSwagger} {
		if v := md.Get(k); len(v) > 0 {
			return metadata.AppendToOutgoingContext(ctx, k, v[0])
		}
	}
	return ctx
}

func forwardTokenUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(forwardToken(ctx), method, req, reply, cc, opts...)
}

func forwardTokenStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(forwardToken(ctx), desc, cc, method, opts...)
}

// authServer is etcd's Auth service over the replicated auth store.
type authServer struct {
	pb.UnimplementedAuthServer
	s *Server
}

// admin returns a caller allowed to manage the auth store (root, or
// anyone while auth is off). It runs before any password is hashed, so
// that no one else can make the server spend bcrypt's work.
func (a *authServer) admin(ctx context.Context) (*caller, error) {
	c, err := a.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.root(); err != nil {
		return nil, err
	}
	return c, nil
}

// change proposes an auth store change on behalf of a root caller.
func (a *authServer) change(ctx context.Context, ch *core.AuthChange) (*pb.ResponseHeader, error) {
	c, err := a.admin(ctx)
	if err != nil {
		return nil, err
	}
	res, err := a.s.propose(ctx, &core.Op{Auth: ch, AuthCheck: c.check()})
	if err != nil {
		return nil, err
	}
	a.s.log.Info("auth store changed", "change", changeName(ch.Kind), "user", ch.User, "role", ch.Role, "by", c.user)
	return a.s.header(res.Rev), nil
}

func changeName(k core.AuthChangeKind) string {
	return [...]string{"", "enable", "disable", "user add", "user delete", "user change password",
		"user grant role", "user revoke role", "role add", "role delete", "role grant permission",
		"role revoke permission"}[k]
}

func (a *authServer) AuthEnable(ctx context.Context, _ *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, grpcError(err)
	}
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthEnable, TokenKey: key})
	if err != nil {
		return nil, err
	}
	return &pb.AuthEnableResponse{Header: h}, nil
}

func (a *authServer) AuthDisable(ctx context.Context, _ *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthDisable})
	if err != nil {
		return nil, err
	}
	return &pb.AuthDisableResponse{Header: h}, nil
}

func (a *authServer) AuthStatus(ctx context.Context, _ *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	st := a.s.b.Auth()
	return &pb.AuthStatusResponse{Header: a.s.header(a.s.currentRev()), Enabled: st.Enabled, AuthRevision: st.Rev}, nil
}

func (a *authServer) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	if err := a.s.b.Linearize(ctx); err != nil {
		return nil, grpcError(err)
	}
	st := a.s.b.Auth()
	if !st.Enabled {
		return nil, rpctypes.ErrGRPCAuthNotEnabled
	}
	u := st.User(r.Name)
	if u == nil || u.NoPassword || bcrypt.CompareHashAndPassword(u.Password, []byte(r.Password)) != nil {
		a.s.log.Info("authentication failed", "user", r.Name, "peer", peerAddr(ctx))
		return nil, rpctypes.ErrGRPCAuthFailed
	}
	if len(st.TokenKey) == 0 {
		var err error
		if st, err = a.keyRestoredStore(ctx); err != nil {
			return nil, err
		}
	}
	token, err := a.s.tokens.assign(st, r.Name, time.Now())
	if err != nil {
		return nil, grpcError(err)
	}
	return &pb.AuthenticateResponse{Header: a.s.header(a.s.currentRev()), Token: token}, nil
}

// keyRestoredStore gives a signing key to an enabled auth store that has
// none, one restored from an etcd backup file (etcd keeps no such key),
// and returns the store with it. The proposal is the auth enable a root
// user would make; core applies it only while the store has no key, so
// members racing to key it agree on the first.
func (a *authServer) keyRestoredStore(ctx context.Context) (*core.AuthState, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, grpcError(err)
	}
	if _, err := a.s.propose(ctx, &core.Op{Auth: &core.AuthChange{Kind: core.AuthEnable, TokenKey: key}}); err != nil {
		return nil, err
	}
	a.s.log.Info("auth store restored without a token signing key: drew one")
	return a.s.b.Auth(), nil
}

// hash turns a request's password into the bcrypt hash the log carries,
// taking an already hashed one (etcd's hashedPassword, base64) as given.
func (a *authServer) hash(password, hashed string) ([]byte, error) {
	if hashed != "" {
		b, err := decodeHashed(hashed)
		if err != nil {
			return nil, rpctypes.ErrGRPCAuthFailed
		}
		return b, nil
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), a.s.cfg.BcryptCost)
	if err != nil {
		return nil, grpcError(err)
	}
	return h, nil
}

func (a *authServer) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	if _, err := a.admin(ctx); err != nil {
		return nil, err
	}
	ch := &core.AuthChange{Kind: core.AuthUserAdd, User: r.Name}
	if r.Options != nil && r.Options.NoPassword {
		ch.NoPassword = true
	} else {
		if r.Name == "" {
			return nil, rpctypes.ErrGRPCUserEmpty
		}
		h, err := a.hash(r.Password, r.HashedPassword)
		if err != nil {
			return nil, err
		}
		ch.Password = h
	}
	h, err := a.change(ctx, ch)
	if err != nil {
		return nil, err
	}
	return &pb.AuthUserAddResponse{Header: h}, nil
}

func (a *authServer) UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthUserDelete, User: r.Name})
	if err != nil {
		return nil, err
	}
	return &pb.AuthUserDeleteResponse{Header: h}, nil
}

func (a *authServer) UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	if _, err := a.admin(ctx); err != nil {
		return nil, err
	}
	pw, err := a.hash(r.Password, r.HashedPassword)
	if err != nil {
		return nil, err
	}
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthUserChangePassword, User: r.Name, Password: pw})
	if err != nil {
		return nil, err
	}
	return &pb.AuthUserChangePasswordResponse{Header: h}, nil
}

func (a *authServer) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthUserGrantRole, User: r.User, Role: r.Role})
	if err != nil {
		return nil, err
	}
	return &pb.AuthUserGrantRoleResponse{Header: h}, nil
}

func (a *authServer) UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthUserRevokeRole, User: r.Name, Role: r.Role})
	if err != nil {
		return nil, err
	}
	return &pb.AuthUserRevokeRoleResponse{Header: h}, nil
}

func (a *authServer) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthRoleAdd, Role: r.Name})
	if err != nil {
		return nil, err
	}
	return &pb.AuthRoleAddResponse{Header: h}, nil
}

func (a *authServer) RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthRoleDelete, Role: r.Role})
	if err != nil {
		return nil, err
	}
	return &pb.AuthRoleDeleteResponse{Header: h}, nil
}

func (a *authServer) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	if r.Perm == nil {
		return nil, rpctypes.ErrGRPCPermissionNotGiven
	}
	p := core.AuthPerm{Type: core.AuthPermType(r.Perm.PermType), Key: r.Perm.Key, End: r.Perm.RangeEnd}
	if r.Perm.PermType < 0 || r.Perm.PermType > authpb.Permission_READWRITE {
		return nil, rpctypes.ErrGRPCInvalidAuthMgmt
	}
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthRoleGrantPermission, Role: r.Name, Perm: p})
	if err != nil {
		return nil, err
	}
	return &pb.AuthRoleGrantPermissionResponse{Header: h}, nil
}

func (a *authServer) RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	h, err := a.change(ctx, &core.AuthChange{Kind: core.AuthRoleRevokePermission, Role: r.Role, Perm: core.AuthPerm{Key: r.Key, End: r.RangeEnd}})
	if err != nil {
		return nil, err
	}
	return &pb.AuthRoleRevokePermissionResponse{Header: h}, nil
}

func (a *authServer) UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	c, err := a.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	// A user may read its own roles; anyone else's needs root.
	if err := c.root(); err != nil && r.Name != c.user {
		return nil, err
	}
	u := c.st.User(r.Name)
	if u == nil {
		return nil, rpctypes.ErrGRPCUserNotFound
	}
	return &pb.AuthUserGetResponse{Header: a.s.header(a.s.currentRev()), Roles: append([]string(nil), u.Roles...)}, nil
}

func (a *authServer) UserList(ctx context.Context, _ *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	c, err := a.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.root(); err != nil {
		return nil, err
	}
	resp := &pb.AuthUserListResponse{Header: a.s.header(a.s.currentRev())}
	for _, u := range c.st.Users {
		resp.Users = append(resp.Users, u.Name)
	}
	return resp, nil
}

func (a *authServer) RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	c, err := a.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.root(); err != nil && !c.st.HasRole(c.user, r.Role) {
		return nil, err
	}
	resp := &pb.AuthRoleGetResponse{Header: a.s.header(a.s.currentRev())}
	if r.Role == core.RootName {
		// etcd shows the root role as read-write on every key.
		resp.Perm = []*authpb.Permission{{PermType: authpb.Permission_READWRITE, Key: []byte{}, RangeEnd: []byte{0}}}
		return resp, nil
	}
	role := c.st.Role(r.Role)
	if role == nil {
		return nil, rpctypes.ErrGRPCRoleNotFound
	}
	for _, p := range role.Perms {
		resp.Perm = append(resp.Perm, &authpb.Permission{PermType: authpb.Permission_Type(p.Type), Key: p.Key, RangeEnd: p.End})
	}
	return resp, nil
}

func (a *authServer) RoleList(ctx context.Context, _ *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	c, err := a.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.root(); err != nil {
		return nil, err
	}
	resp := &pb.AuthRoleListResponse{Header: a.s.header(a.s.currentRev())}
	for _, r := range c.st.Roles {
		resp.Roles = append(resp.Roles, r.Name)
	}
	return resp, nil
}

// authErrors are etcd's answers to the auth store's refusals.
var authErrors = map[core.Code]error{
	core.CodeAuthOldRevision:          rpctypes.ErrGRPCAuthOldRevision,
	core.CodeAuthUserEmpty:            rpctypes.ErrGRPCUserEmpty,
	core.CodeAuthUserExists:           rpctypes.ErrGRPCUserAlreadyExist,
	core.CodeAuthUserNotFound:         rpctypes.ErrGRPCUserNotFound,
	core.CodeAuthRoleEmpty:            rpctypes.ErrGRPCRoleEmpty,
	core.CodeAuthRoleExists:           rpctypes.ErrGRPCRoleAlreadyExist,
	core.CodeAuthRoleNotFound:         rpctypes.ErrGRPCRoleNotFound,
	core.CodeAuthRootUserNotExist:     rpctypes.ErrGRPCRootUserNotExist,
	core.CodeAuthRootRoleNotExist:     rpctypes.ErrGRPCRootRoleNotExist,
	core.CodeAuthRoleNotGranted:       rpctypes.ErrGRPCRoleNotGranted,
	core.CodeAuthPermissionNotGranted: rpctypes.ErrGRPCPermissionNotGranted,
	core.CodeAuthInvalidMgmt:          rpctypes.ErrGRPCInvalidAuthMgmt,
	core.CodeAuthPermissionDenied:     rpctypes.ErrGRPCPermissionDenied,
	// A ZooKeeper ACL refusing the caller's etcd identity.
	core.CodeNoAuth: rpctypes.ErrGRPCPermissionDenied,
}

// decodeHashed reads etcd's hashedPassword field: a bcrypt hash in
// standard base64.
func decodeHashed(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("etcdapi: hashed password is not base64: %w", err)
	}
	if _, err := bcrypt.Cost(b); err != nil {
		return nil, fmt.Errorf("etcdapi: hashed password is no bcrypt hash: %w", err)
	}
	return b, nil
}

// TokenUser returns the user an etcd auth token names, refusing a token
// that is invalid, expired or issued before the last auth change exactly
// as a request carrying it would be refused. With auth disabled it returns
// "" and no error: everyone may do anything. The web console asks it, so
// that a person logged in there sees only what the same user could read
// with a client.
func (s *Server) TokenUser(token string) (string, error) {
	ctx := context.Background()
	if token != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(rpctypes.TokenFieldNameGRPC, token))
	}
	c, err := s.caller(ctx)
	if err != nil {
		return "", err
	}
	if !c.st.Enabled {
		return "", nil
	}
	if err := c.authorized(); err != nil {
		return "", err
	}
	return c.user, nil
}
