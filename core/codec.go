package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The binary forms below are what the log and the store keep. They are
// deterministic (no maps, fixed field order) and start with a format byte so
// a later format can be told apart.

const formatV1 = 1

var errCorrupt = errors.New("core: corrupt record")

func putUint64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
func getUint64(b []byte) uint64    { return binary.BigEndian.Uint64(b) }

type encoder struct{ b []byte }

func (e *encoder) u(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) i(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) byte(v byte) { e.b = append(e.b, v) }
func (e *encoder) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

// bytes keeps nil and empty apart: length+1, 0 for nil.
func (e *encoder) bytes(v []byte) {
	if v == nil {
		e.u(0)
		return
	}
	e.u(uint64(len(v)) + 1)
	e.b = append(e.b, v...)
}
func (e *encoder) str(s string) { e.u(uint64(len(s))); e.b = append(e.b, s...) }

type decoder struct {
	b   []byte
	err error
	// shared makes bytes return slices of b instead of copies.
	shared bool
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
}

func (d *decoder) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool() bool { return d.byte() != 0 }

func (d *decoder) bytes() []byte {
	n := d.u()
	if d.err != nil || n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	var v []byte
	if d.shared {
		v = d.b[:n:n]
	} else {
		v = make([]byte, n)
		copy(v, d.b)
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.strBytes()) }

// strBytes reads a string's bytes in place.
func (d *decoder) strBytes() []byte {
	n := d.u()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// aclWords are the ACL schemes, and the one well-known ID, that most
// nodes' ACLs are made of: decoding hands out these strings instead of a
// new copy of each, two allocations fewer for every node read with
// ZooKeeper's open ACL.
var aclWords = [...]string{"world", "anyone", "digest", "ip", "auth", "sasl", "x509"}

// aclStr reads a string of an ACL entry.
func (d *decoder) aclStr() string {
	b := d.strBytes()
	for _, w := range aclWords {
		if string(b) == w {
			return w
		}
	}
	return string(b)
}

// count reads a collection length, refusing one the remaining input cannot
// hold (each element takes at least min bytes) so garbage cannot make us
// allocate.
func (d *decoder) count(min int) int {
	n := d.u()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/min) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) header() {
	if v := d.byte(); v != formatV1 && d.err == nil {
		d.err = fmt.Errorf("core: unknown record format %d", v)
	}
}

func (d *decoder) finish(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	if d.err != nil {
		return fmt.Errorf("decode %s: %w", what, d.err)
	}
	return nil
}

func (e *encoder) acl(acl []ACL) {
	if acl == nil {
		e.u(0)
		return
	}
	e.u(uint64(len(acl)) + 1)
	for _, a := range acl {
		e.i(int64(a.Perms))
		e.str(a.ID.Scheme)
		e.str(a.ID.ID)
	}
}

func (d *decoder) acl() []ACL {
	n := d.u()
	if d.err != nil || n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.b)/3) {
		d.fail()
		return nil
	}
	acl := make([]ACL, n)
	for i := range acl {
		acl[i].Perms = Perm(d.i())
		acl[i].ID.Scheme = d.aclStr()
		acl[i].ID.ID = d.aclStr()
	}
	return acl
}

// AppendNode appends the stored form of n (without its key, which the store
// keeps as the record's key).
func AppendNode(b []byte, n *Node) []byte {
	// Room for the longest form, grown once: the fixed fields are at most
	// ten varints of ten bytes and two bytes.
	e := encoder{slices.Grow(b, len(n.Value)+102+aclSizeHint(n.ACL))}
	e.byte(formatV1)
	e.bytes(n.Value)
	e.i(n.CreateRev)
	e.i(n.ModRev)
	e.i(n.Version)
	e.i(n.Lease)
	e.i(n.Ctime)
	e.i(n.Mtime)
	e.i(int64(n.Aversion))
	e.byte(byte(n.Mode))
	e.i(n.TTL)
	e.acl(n.ACL)
	return e.b
}

// DecodeNode decodes a stored node whose key is key. The node keeps no
// part of b.
func DecodeNode(key, b []byte) (*Node, error) {
	return decodeNode(key, decoder{b: b})
}

// DecodeNodeShared decodes a stored node whose key is key, as DecodeNode
// does, except that the node's Value is a part of b: for a caller that
// keeps b, and the node, unchanged for as long as the node lives (the
// store's record cache).
func DecodeNodeShared(key, b []byte) (*Node, error) {
	return decodeNode(key, decoder{b: b, shared: true})
}

func decodeNode(key []byte, d decoder) (*Node, error) {
	d.header()
	n := &Node{Key: key}
	n.Value = d.bytes()
	n.CreateRev = d.i()
	n.ModRev = d.i()
	n.Version = d.i()
	n.Lease = d.i()
	n.Ctime = d.i()
	n.Mtime = d.i()
	n.Aversion = int32(d.i())
	n.Mode = Mode(d.byte())
	n.TTL = d.i()
	n.ACL = d.acl()
	if n.Value == nil {
		n.Value = []byte{}
	}
	return n, d.finish("node")
}

// AppendDir appends the stored form of d.
func AppendDir(b []byte, dir *Dir) []byte {
	e := encoder{b}
	e.byte(formatV1)
	e.i(int64(dir.NumChildren))
	e.i(int64(dir.Cversion))
	e.i(dir.Pzxid)
	e.i(int64(dir.Seq))
	e.i(dir.ImplicitRev)
	e.i(dir.ImplicitTime)
	return e.b
}

// DecodeDir decodes a stored Dir.
func DecodeDir(b []byte) (*Dir, error) {
	d := decoder{b: b}
	d.header()
	dir := &Dir{}
	dir.NumChildren = int32(d.i())
	dir.Cversion = int32(d.i())
	dir.Pzxid = d.i()
	dir.Seq = int32(d.i())
	dir.ImplicitRev = d.i()
	dir.ImplicitTime = d.i()
	return dir, d.finish("dir")
}

// AppendLease appends the stored form of l.
func AppendLease(b []byte, l *Lease) []byte {
	e := encoder{b}
	e.byte(formatV1)
	e.i(l.ID)
	e.i(l.TTL)
	e.bool(l.Session != nil)
	if l.Session != nil {
		e.i(int64(l.Session.TimeoutMs))
		e.bytes(l.Session.Password)
	}
	return e.b
}

// DecodeLease decodes a stored Lease.
func DecodeLease(b []byte) (*Lease, error) {
	d := decoder{b: b}
	d.header()
	l := &Lease{ID: d.i(), TTL: d.i()}
	if d.bool() {
		l.Session = &Session{TimeoutMs: int32(d.i()), Password: d.bytes()}
	}
	return l, d.finish("lease")
}

// AppendMeta appends the stored form of m.
func AppendMeta(b []byte, m Meta) []byte {
	e := encoder{b}
	e.byte(formatV1)
	e.i(m.Rev)
	e.i(m.CompactRev)
	// Alarms follow only when there are any, the compacted flag only
	// when it says more than CompactRev does (a compaction to 0), and the
	// auth store only once it was ever changed; each is written when a
	// later one is, so records written before any of them existed decode
	// unchanged.
	zeroCompacted := m.Compacted && m.CompactRev == 0
	if len(m.Alarms) > 0 || zeroCompacted || m.Auth != nil {
		e.u(uint64(len(m.Alarms)))
		for _, a := range m.Alarms {
			e.u(a.Member)
			e.byte(byte(a.Type))
		}
	}
	if zeroCompacted || m.Auth != nil {
		e.bool(zeroCompacted)
	}
	if m.Auth != nil {
		e.b = appendAuth(e.b, m.Auth)
	}
	return e.b
}

// appendAuth appends the stored form of an auth store.
func appendAuth(b []byte, s *AuthState) []byte {
	e := encoder{b}
	e.bool(s.Enabled)
	e.u(s.Rev)
	e.bytes(s.TokenKey)
	e.u(uint64(len(s.Users)))
	for _, u := range s.Users {
		e.str(u.Name)
		e.bytes(u.Password)
		e.bool(u.NoPassword)
		e.u(uint64(len(u.Roles)))
		for _, r := range u.Roles {
			e.str(r)
		}
	}
	e.u(uint64(len(s.Roles)))
	for _, r := range s.Roles {
		e.str(r.Name)
		e.u(uint64(len(r.Perms)))
		for _, p := range r.Perms {
			e.authPerm(p)
		}
	}
	return e.b
}

func (e *encoder) authPerm(p AuthPerm) {
	e.byte(byte(p.Type))
	e.bytes(p.Key)
	e.bytes(p.End)
}

func (d *decoder) authPerm() AuthPerm {
	return AuthPerm{Type: AuthPermType(d.byte()), Key: d.bytes(), End: d.bytes()}
}

// makeN makes a slice of n elements, nil for none.
func makeN[T any](n int) []T {
	if n == 0 {
		return nil
	}
	return make([]T, n)
}

func (d *decoder) auth() *AuthState {
	s := &AuthState{Enabled: d.bool(), Rev: d.u(), TokenKey: d.bytes()}
	s.Users = makeN[AuthUser](d.count(4))
	for i := range s.Users {
		u := &s.Users[i]
		u.Name, u.Password, u.NoPassword = d.str(), d.bytes(), d.bool()
		u.Roles = makeN[string](d.count(1))
		for j := range u.Roles {
			u.Roles[j] = d.str()
		}
	}
	s.Roles = makeN[AuthRole](d.count(2))
	for i := range s.Roles {
		r := &s.Roles[i]
		r.Name = d.str()
		r.Perms = makeN[AuthPerm](d.count(3))
		for j := range r.Perms {
			r.Perms[j] = d.authPerm()
		}
	}
	return s
}

// DecodeMeta decodes stored Meta.
func DecodeMeta(b []byte) (Meta, error) {
	d := decoder{b: b}
	d.header()
	m := Meta{Rev: d.i(), CompactRev: d.i()}
	if d.err == nil && len(d.b) > 0 {
		if n := d.count(2); n > 0 {
			m.Alarms = make([]Alarm, n)
		}
		for i := range m.Alarms {
			m.Alarms[i] = Alarm{Member: d.u(), Type: AlarmType(d.byte())}
		}
	}
	if d.err == nil && len(d.b) > 0 {
		m.Compacted = d.bool()
	}
	m.Compacted = m.Compacted || m.CompactRev > 0
	if d.err == nil && len(d.b) > 0 {
		m.Auth = d.auth()
	}
	return m, d.finish("meta")
}

// Op kinds in the log.
const (
	opTagTxn byte = iota + 1
	opTagLeaseGrant
	opTagLeaseRevoke
	opTagCompact
	opTagHashCheck
	opTagHashReport
	opTagAlarm
	opTagAuth
)

// EncodeOp returns the log form of op.
func EncodeOp(op *Op) []byte {
	size := 64
	if op.Txn != nil {
		size += txnSizeHint(op.Txn)
	}
	e := encoder{make([]byte, 0, size)}
	e.byte(formatV1)
	switch {
	case op.Txn != nil:
		e.byte(opTagTxn)
		e.txn(op.Txn)
	case op.LeaseGrant != nil:
		g := op.LeaseGrant
		e.byte(opTagLeaseGrant)
		e.i(g.ID)
		e.i(g.TTL)
		e.bool(g.Session != nil)
		if g.Session != nil {
			e.i(int64(g.Session.TimeoutMs))
			e.bytes(g.Session.Password)
		}
	case op.LeaseRevoke != nil:
		e.byte(opTagLeaseRevoke)
		e.i(op.LeaseRevoke.ID)
	case op.Compact != nil:
		e.byte(opTagCompact)
		e.i(op.Compact.Rev)
	case op.HashCheck != nil:
		e.byte(opTagHashCheck)
	case op.HashReport != nil:
		r := op.HashReport
		e.byte(opTagHashReport)
		e.u(r.Member)
		e.u(r.Index)
		e.u(r.Hash)
	case op.Alarm != nil:
		a := op.Alarm
		e.byte(opTagAlarm)
		e.bool(a.Activate)
		e.u(a.Alarm.Member)
		e.byte(byte(a.Alarm.Type))
	case op.Auth != nil:
		c := op.Auth
		e.byte(opTagAuth)
		e.byte(byte(c.Kind))
		e.str(c.User)
		e.str(c.Role)
		e.bytes(c.Password)
		e.bool(c.NoPassword)
		e.authPerm(c.Perm)
		e.bytes(c.TokenKey)
	default:
		e.byte(0)
	}
	// The auth check and then the origin trail the op, each written only
	// when it or a later one is there, so ops logged before either existed
	// decode unchanged. An origin without an auth check writes the check's
	// place as absent (see noAuthCheck).
	switch c := op.AuthCheck; {
	case c != nil:
		e.u(c.Rev)
		e.bool(c.Enabled)
	case op.Origin != OriginUnknown:
		e.u(0)
		e.byte(noAuthCheck)
	}
	if op.Origin != OriginUnknown {
		e.byte(byte(op.Origin))
	}
	return e.b
}

// noAuthCheck stands where an auth check's Enabled flag (0 or 1) would be,
// to say there is none: written only when an origin follows.
const noAuthCheck = 2

// LogEntry decodes a logged op into the Entry Apply takes. A record that
// does not decode is no reason to stop a member: every member reads the
// same bytes, so each turns them into the empty Op, which Apply refuses
// (CodeBadArguments) alike. The decode error is returned with the Entry for
// the caller to log.
func LogEntry(index uint64, time int64, data []byte) (Entry, error) {
	e := Entry{Index: index, Time: time}
	op, err := DecodeOp(data)
	if err != nil {
		return e, err
	}
	e.Op = *op
	return e, nil
}

// DecodeOp decodes the log form of an op.
func DecodeOp(b []byte) (*Op, error) {
	d := decoder{b: b}
	d.header()
	op := &Op{}
	switch d.byte() {
	case opTagTxn:
		op.Txn = d.txn(1)
	case opTagLeaseGrant:
		g := &LeaseGrant{ID: d.i(), TTL: d.i()}
		if d.bool() {
			g.Session = &Session{TimeoutMs: int32(d.i()), Password: d.bytes()}
		}
		op.LeaseGrant = g
	case opTagLeaseRevoke:
		op.LeaseRevoke = &LeaseRevoke{ID: d.i()}
	case opTagCompact:
		op.Compact = &Compact{Rev: d.i()}
	case opTagHashCheck:
		op.HashCheck = &HashCheck{}
	case opTagHashReport:
		op.HashReport = &HashReport{Member: d.u(), Index: d.u(), Hash: d.u()}
	case opTagAlarm:
		a := &AlarmChange{Activate: d.bool()}
		a.Alarm = Alarm{Member: d.u(), Type: AlarmType(d.byte())}
		op.Alarm = a
	case opTagAuth:
		c := &AuthChange{Kind: AuthChangeKind(d.byte()), User: d.str(), Role: d.str(), Password: d.bytes(), NoPassword: d.bool()}
		c.Perm = d.authPerm()
		c.TokenKey = d.bytes()
		op.Auth = c
	case 0:
	default:
		d.fail()
	}
	if d.err == nil && len(d.b) > 0 {
		rev := d.u()
		switch enabled := d.byte(); enabled {
		case 0, 1:
			op.AuthCheck = &AuthCheck{Rev: rev, Enabled: enabled == 1}
		case noAuthCheck:
		default:
			d.fail()
		}
	}
	if d.err == nil && len(d.b) > 0 {
		op.Origin = Origin(d.byte())
	}
	return op, d.finish("op")
}

// txnSizeHint is about what encoder.txn writes for t: its variable-length
// fields and an allowance for the rest of each op, so that EncodeOp
// allocates its buffer once (growing it from a fixed guess was 2% of a
// ZooKeeper create's CPU).
func txnSizeHint(t *Txn) int {
	n := 16
	for _, c := range t.Compares {
		n += len(c.Key) + len(c.End) + len(c.Value) + 24
	}
	for _, ops := range [][]TxnOp{t.Success, t.Failure} {
		for i := range ops {
			op := &ops[i]
			n += len(op.Key) + len(op.End) + len(op.Value) + 40 + aclSizeHint(op.ACL)
			if op.Range != nil {
				n += 64
			}
			if op.Create != nil {
				n += 32 + aclSizeHint(op.Create.ACL)
			}
			if op.Txn != nil {
				n += txnSizeHint(op.Txn)
			}
		}
	}
	for _, id := range t.Auth {
		n += len(id.Scheme) + len(id.ID) + 4
	}
	return n
}

func aclSizeHint(acl []ACL) int {
	n := 2
	for _, a := range acl {
		n += len(a.ID.Scheme) + len(a.ID.ID) + 8
	}
	return n
}

func (e *encoder) txn(t *Txn) {
	e.u(uint64(len(t.Compares)))
	for _, c := range t.Compares {
		e.bytes(c.Key)
		e.bytes(c.End)
		e.byte(byte(c.Target))
		e.byte(byte(c.Result))
		e.i(c.Int)
		e.bytes(c.Value)
	}
	for _, ops := range [][]TxnOp{t.Success, t.Failure} {
		e.u(uint64(len(ops)))
		for i := range ops {
			e.txnOp(&ops[i])
		}
	}
	e.bool(t.Auth != nil)
	if t.Auth != nil {
		e.u(uint64(len(t.Auth)))
		for _, id := range t.Auth {
			e.str(id.Scheme)
			e.str(id.ID)
		}
	}
}

// txn decodes a Txn nested depth deep (the outermost is 1). Nesting over
// MaxTxnDepth is refused, so a hostile record cannot exhaust the stack.
func (d *decoder) txn(depth int) *Txn {
	if depth > MaxTxnDepth {
		d.fail()
		return &Txn{}
	}
	t := &Txn{}
	n := d.count(6)
	if n > 0 {
		t.Compares = make([]Compare, n)
	}
	for i := 0; i < n; i++ {
		c := &t.Compares[i]
		c.Key = d.bytes()
		c.End = d.bytes()
		c.Target = CompareTarget(d.byte())
		c.Result = CompareResult(d.byte())
		c.Int = d.i()
		c.Value = d.bytes()
	}
	for _, dst := range []*[]TxnOp{&t.Success, &t.Failure} {
		n := d.count(2)
		if n > 0 {
			*dst = make([]TxnOp, n)
		}
		for i := 0; i < n; i++ {
			d.txnOp(&(*dst)[i], depth)
		}
	}
	if d.bool() {
		n := d.count(2)
		t.Auth = make([]ID, n)
		for i := range t.Auth {
			t.Auth[i].Scheme = d.str()
			t.Auth[i].ID = d.str()
		}
	}
	return t
}

func (e *encoder) txnOp(op *TxnOp) {
	e.byte(byte(op.Kind))
	e.bytes(op.Key)
	e.bytes(op.End)
	e.bool(op.Range != nil)
	if r := op.Range; r != nil {
		e.i(r.Rev)
		e.i(r.Limit)
		e.byte(byte(r.SortOrder))
		e.byte(byte(r.SortTarget))
		e.bool(r.KeysOnly)
		e.bool(r.CountOnly)
		e.i(r.MinModRev)
		e.i(r.MaxModRev)
		e.i(r.MinCreateRev)
		e.i(r.MaxCreateRev)
	}
	e.bytes(op.Value)
	e.i(op.Lease)
	e.bool(op.PrevKV)
	e.bool(op.IgnoreValue)
	e.bool(op.IgnoreLease)
	e.bool(op.Create != nil)
	if c := op.Create; c != nil {
		e.byte(byte(c.Mode))
		e.bool(c.Sequential)
		e.i(c.Lease)
		e.i(c.TTL)
		e.acl(c.ACL)
	}
	e.i(int64(op.ExpectedVersion))
	e.acl(op.ACL)
	e.bool(op.Txn != nil)
	if op.Txn != nil {
		e.txn(op.Txn)
	}
}

func (d *decoder) txnOp(op *TxnOp, depth int) {
	op.Kind = OpKind(d.byte())
	op.Key = d.bytes()
	op.End = d.bytes()
	if d.bool() {
		r := &RangeOptions{}
		r.Rev = d.i()
		r.Limit = d.i()
		r.SortOrder = SortOrder(d.byte())
		r.SortTarget = SortTarget(d.byte())
		r.KeysOnly = d.bool()
		r.CountOnly = d.bool()
		r.MinModRev = d.i()
		r.MaxModRev = d.i()
		r.MinCreateRev = d.i()
		r.MaxCreateRev = d.i()
		op.Range = r
	}
	op.Value = d.bytes()
	op.Lease = d.i()
	op.PrevKV = d.bool()
	op.IgnoreValue = d.bool()
	op.IgnoreLease = d.bool()
	if d.bool() {
		c := &CreateOptions{}
		c.Mode = Mode(d.byte())
		c.Sequential = d.bool()
		c.Lease = d.i()
		c.TTL = d.i()
		c.ACL = d.acl()
		op.Create = c
	}
	op.ExpectedVersion = int32(d.i())
	op.ACL = d.acl()
	if d.bool() {
		op.Txn = d.txn(depth + 1)
	}
}
