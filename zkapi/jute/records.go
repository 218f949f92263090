package jute

// This file holds the records of zookeeper.jute the client protocol uses,
// in the order the .jute file declares them. Field names follow the .jute
// names.

// ID is an authenticated identity: a scheme ("world", "digest", "ip",
// "auth", "sasl") and an id within it.
type ID struct {
	Scheme string
	ID     string
}

func (r *ID) Encode(e *Encoder) { e.UString(r.Scheme); e.UString(r.ID) }
func (r *ID) Decode(d *Decoder) { r.Scheme = d.UString(); r.ID = d.UString() }

// ACL grants Perms (PermRead|...) to an ID.
type ACL struct {
	Perms int32
	ID    ID
}

func (r *ACL) Encode(e *Encoder) { e.Int32(r.Perms); r.ID.Encode(e) }
func (r *ACL) Decode(d *Decoder) { r.Perms = d.Int32(); r.ID.Decode(d) }

// minACLSize is the fewest bytes an encoded ACL takes: perms and two empty
// ustrings.
const minACLSize = 12

func encodeACLs(e *Encoder, acls []ACL) {
	e.VectorLen(len(acls))
	for i := range acls {
		acls[i].Encode(e)
	}
}

func decodeACLs(d *Decoder) []ACL {
	n := d.VectorLen(minACLSize)
	if n < 0 || d.Err() != nil {
		return nil
	}
	acls := make([]ACL, n)
	for i := range acls {
		acls[i].Decode(d)
	}
	if d.Err() != nil {
		return nil
	}
	return acls
}

// Stat is a znode's metadata as clients see it.
type Stat struct {
	Czxid          int64 // zxid of the create
	Mzxid          int64 // zxid of the last data change
	Ctime          int64 // creation time, ms since the epoch
	Mtime          int64 // last data change time, ms since the epoch
	Version        int32 // data version
	Cversion       int32 // children version
	Aversion       int32 // ACL version
	EphemeralOwner int64 // owning session id if ephemeral, else 0
	DataLength     int32
	NumChildren    int32
	Pzxid          int64 // zxid of the last change to the children
}

// StatSize is the encoded size of a Stat.
const StatSize = 68

func (r *Stat) Encode(e *Encoder) {
	e.Int64(r.Czxid)
	e.Int64(r.Mzxid)
	e.Int64(r.Ctime)
	e.Int64(r.Mtime)
	e.Int32(r.Version)
	e.Int32(r.Cversion)
	e.Int32(r.Aversion)
	e.Int64(r.EphemeralOwner)
	e.Int32(r.DataLength)
	e.Int32(r.NumChildren)
	e.Int64(r.Pzxid)
}

func (r *Stat) Decode(d *Decoder) {
	r.Czxid = d.Int64()
	r.Mzxid = d.Int64()
	r.Ctime = d.Int64()
	r.Mtime = d.Int64()
	r.Version = d.Int32()
	r.Cversion = d.Int32()
	r.Aversion = d.Int32()
	r.EphemeralOwner = d.Int64()
	r.DataLength = d.Int32()
	r.NumChildren = d.Int32()
	r.Pzxid = d.Int64()
}

// ClientInfo is one identity of a session, as whoAmI reports it.
type ClientInfo struct {
	AuthScheme string
	User       string
}

func (r *ClientInfo) Encode(e *Encoder) { e.UString(r.AuthScheme); e.UString(r.User) }
func (r *ClientInfo) Decode(d *Decoder) { r.AuthScheme = d.UString(); r.User = d.UString() }

// ConnectRequest opens or resumes a session. It is the first frame a client
// sends, with no RequestHeader.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32 // requested session timeout, ms
	SessionID       int64 // 0 for a new session
	Passwd          []byte
	// ReadOnly is the client's "may be read-only" flag. Clients older than
	// 3.4 do not send it; HasReadOnly records whether it was present,
	// since the server answers with the trailing byte only if it was.
	ReadOnly    bool
	HasReadOnly bool
}

func (r *ConnectRequest) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int64(r.LastZxidSeen)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

func (r *ConnectRequest) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int32()
	r.LastZxidSeen = d.Int64()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	r.ReadOnly, r.HasReadOnly = false, false
	if d.Err() == nil && d.Remaining() > 0 {
		r.ReadOnly = d.Bool()
		r.HasReadOnly = true
	}
}

// ConnectResponse answers a ConnectRequest, with no ReplyHeader. A refused
// session is answered with TimeOut 0, SessionID 0 and 16 zero bytes of
// password.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32 // negotiated session timeout, ms
	SessionID       int64
	Passwd          []byte
	// ReadOnly says whether the server is in read-only mode. It is written
	// only if HasReadOnly is set, which a server sets exactly when the
	// request carried the flag.
	ReadOnly    bool
	HasReadOnly bool
}

func (r *ConnectResponse) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

func (r *ConnectResponse) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int32()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	r.ReadOnly, r.HasReadOnly = false, false
	if d.Err() == nil && d.Remaining() > 0 {
		r.ReadOnly = d.Bool()
		r.HasReadOnly = true
	}
}

// SetWatches re-registers watches after a reconnect (OpSetWatches, xid
// XidSetWatches). RelativeZxid is the last zxid the client saw.
type SetWatches struct {
	RelativeZxid int64
	DataWatches  []string
	ExistWatches []string
	ChildWatches []string
}

func (r *SetWatches) Encode(e *Encoder) {
	e.Int64(r.RelativeZxid)
	e.StringVector(r.DataWatches)
	e.StringVector(r.ExistWatches)
	e.StringVector(r.ChildWatches)
}

func (r *SetWatches) Decode(d *Decoder) {
	r.RelativeZxid = d.Int64()
	r.DataWatches = d.StringVector()
	r.ExistWatches = d.StringVector()
	r.ChildWatches = d.StringVector()
}

// SetWatches2 is SetWatches with persistent watches (OpSetWatches2).
type SetWatches2 struct {
	RelativeZxid               int64
	DataWatches                []string
	ExistWatches               []string
	ChildWatches               []string
	PersistentWatches          []string
	PersistentRecursiveWatches []string
}

func (r *SetWatches2) Encode(e *Encoder) {
	e.Int64(r.RelativeZxid)
	e.StringVector(r.DataWatches)
	e.StringVector(r.ExistWatches)
	e.StringVector(r.ChildWatches)
	e.StringVector(r.PersistentWatches)
	e.StringVector(r.PersistentRecursiveWatches)
}

func (r *SetWatches2) Decode(d *Decoder) {
	r.RelativeZxid = d.Int64()
	r.DataWatches = d.StringVector()
	r.ExistWatches = d.StringVector()
	r.ChildWatches = d.StringVector()
	r.PersistentWatches = d.StringVector()
	r.PersistentRecursiveWatches = d.StringVector()
}

// RequestHeader starts every request after the handshake.
type RequestHeader struct {
	Xid  int32
	Type OpCode
}

// RequestHeaderSize is the encoded size of a RequestHeader.
const RequestHeaderSize = 8

func (r *RequestHeader) Encode(e *Encoder) { e.Int32(r.Xid); e.Int32(int32(r.Type)) }
func (r *RequestHeader) Decode(d *Decoder) { r.Xid = d.Int32(); r.Type = OpCode(d.Int32()) }

// MultiHeader precedes each op of a multi request and each result of a
// multi response; one with Done set ends the list.
type MultiHeader struct {
	Type OpCode
	Done bool
	Err  Code
}

func (r *MultiHeader) Encode(e *Encoder) {
	e.Int32(int32(r.Type))
	e.Bool(r.Done)
	e.Int32(int32(r.Err))
}
func (r *MultiHeader) Decode(d *Decoder) {
	r.Type = OpCode(d.Int32())
	r.Done = d.Bool()
	r.Err = Code(d.Int32())
}

// AuthPacket adds an identity to the session (OpAuth, xid XidAuth). Type is
// unused and sent as 0.
type AuthPacket struct {
	Type   int32
	Scheme string
	Auth   []byte
}

func (r *AuthPacket) Encode(e *Encoder) { e.Int32(r.Type); e.UString(r.Scheme); e.Buffer(r.Auth) }
func (r *AuthPacket) Decode(d *Decoder) {
	r.Type = d.Int32()
	r.Scheme = d.UString()
	r.Auth = d.Buffer()
}

// ReplyHeader starts every reply and notification. Zxid is the last zxid
// the server has applied; Err is CodeOk or the request's error, in which
// case no response record follows.
type ReplyHeader struct {
	Xid  int32
	Zxid int64
	Err  Code
}

// ReplyHeaderSize is the encoded size of a ReplyHeader.
const ReplyHeaderSize = 16

func (r *ReplyHeader) Encode(e *Encoder) { e.Int32(r.Xid); e.Int64(r.Zxid); e.Int32(int32(r.Err)) }
func (r *ReplyHeader) Decode(d *Decoder) {
	r.Xid = d.Int32()
	r.Zxid = d.Int64()
	r.Err = Code(d.Int32())
}

// GetDataRequest reads a node's data and Stat (OpGetData).
type GetDataRequest struct {
	Path  string
	Watch bool
}

func (r *GetDataRequest) Encode(e *Encoder) { e.UString(r.Path); e.Bool(r.Watch) }
func (r *GetDataRequest) Decode(d *Decoder) { r.Path = d.UString(); r.Watch = d.Bool() }

// SetDataRequest replaces a node's data if Version matches (-1: any).
type SetDataRequest struct {
	Path    string
	Data    []byte
	Version int32
}

func (r *SetDataRequest) Encode(e *Encoder) { e.UString(r.Path); e.Buffer(r.Data); e.Int32(r.Version) }
func (r *SetDataRequest) Decode(d *Decoder) {
	r.Path = d.UString()
	r.Data = d.Buffer()
	r.Version = d.Int32()
}

// ReconfigRequest changes the ensemble (OpReconfig). Janus decodes it only to
// answer it; null strings read as "".
type ReconfigRequest struct {
	JoiningServers string
	LeavingServers string
	NewMembers     string
	CurConfigID    int64
}

func (r *ReconfigRequest) Encode(e *Encoder) {
	e.UString(r.JoiningServers)
	e.UString(r.LeavingServers)
	e.UString(r.NewMembers)
	e.Int64(r.CurConfigID)
}

func (r *ReconfigRequest) Decode(d *Decoder) {
	r.JoiningServers = d.UString()
	r.LeavingServers = d.UString()
	r.NewMembers = d.UString()
	r.CurConfigID = d.Int64()
}

// SetDataResponse answers OpSetData.
type SetDataResponse struct{ Stat Stat }

func (r *SetDataResponse) Encode(e *Encoder) { r.Stat.Encode(e) }
func (r *SetDataResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// GetSASLRequest carries a SASL token from the client (OpSASL).
type GetSASLRequest struct{ Token []byte }

func (r *GetSASLRequest) Encode(e *Encoder) { e.Buffer(r.Token) }
func (r *GetSASLRequest) Decode(d *Decoder) { r.Token = d.Buffer() }

// SetSASLResponse carries the server's SASL challenge back.
type SetSASLResponse struct{ Token []byte }

func (r *SetSASLResponse) Encode(e *Encoder) { e.Buffer(r.Token) }
func (r *SetSASLResponse) Decode(d *Decoder) { r.Token = d.Buffer() }

// CreateRequest creates a node (OpCreate, OpCreate2, OpCreateContainer).
type CreateRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags CreateMode
}

func (r *CreateRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Buffer(r.Data)
	encodeACLs(e, r.ACL)
	e.Int32(int32(r.Flags))
}

func (r *CreateRequest) Decode(d *Decoder) {
	r.Path = d.UString()
	r.Data = d.Buffer()
	r.ACL = decodeACLs(d)
	r.Flags = CreateMode(d.Int32())
}

// CreateTTLRequest creates a node with a time to live in ms (OpCreateTTL).
type CreateTTLRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags CreateMode
	TTL   int64
}

func (r *CreateTTLRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Buffer(r.Data)
	encodeACLs(e, r.ACL)
	e.Int32(int32(r.Flags))
	e.Int64(r.TTL)
}

func (r *CreateTTLRequest) Decode(d *Decoder) {
	r.Path = d.UString()
	r.Data = d.Buffer()
	r.ACL = decodeACLs(d)
	r.Flags = CreateMode(d.Int32())
	r.TTL = d.Int64()
}

// DeleteRequest deletes a node if Version matches (-1: any).
type DeleteRequest struct {
	Path    string
	Version int32
}

func (r *DeleteRequest) Encode(e *Encoder) { e.UString(r.Path); e.Int32(r.Version) }
func (r *DeleteRequest) Decode(d *Decoder) { r.Path = d.UString(); r.Version = d.Int32() }

// GetChildrenRequest lists a node's children (OpGetChildren).
type GetChildrenRequest struct {
	Path  string
	Watch bool
}

func (r *GetChildrenRequest) Encode(e *Encoder) { e.UString(r.Path); e.Bool(r.Watch) }
func (r *GetChildrenRequest) Decode(d *Decoder) { r.Path = d.UString(); r.Watch = d.Bool() }

// GetAllChildrenNumberRequest counts a node's descendants.
type GetAllChildrenNumberRequest struct{ Path string }

func (r *GetAllChildrenNumberRequest) Encode(e *Encoder) { e.UString(r.Path) }
func (r *GetAllChildrenNumberRequest) Decode(d *Decoder) { r.Path = d.UString() }

// GetChildren2Request lists a node's children with its Stat.
type GetChildren2Request struct {
	Path  string
	Watch bool
}

func (r *GetChildren2Request) Encode(e *Encoder) { e.UString(r.Path); e.Bool(r.Watch) }
func (r *GetChildren2Request) Decode(d *Decoder) { r.Path = d.UString(); r.Watch = d.Bool() }

// CheckVersionRequest asserts a node's version inside a multi (OpCheck).
type CheckVersionRequest struct {
	Path    string
	Version int32
}

func (r *CheckVersionRequest) Encode(e *Encoder) { e.UString(r.Path); e.Int32(r.Version) }
func (r *CheckVersionRequest) Decode(d *Decoder) { r.Path = d.UString(); r.Version = d.Int32() }

// SyncRequest asks that the next read see everything committed before it.
type SyncRequest struct{ Path string }

func (r *SyncRequest) Encode(e *Encoder) { e.UString(r.Path) }
func (r *SyncRequest) Decode(d *Decoder) { r.Path = d.UString() }

// SyncResponse answers OpSync with the request's path.
type SyncResponse struct{ Path string }

func (r *SyncResponse) Encode(e *Encoder) { e.UString(r.Path) }
func (r *SyncResponse) Decode(d *Decoder) { r.Path = d.UString() }

// GetACLRequest reads a node's ACL.
type GetACLRequest struct{ Path string }

func (r *GetACLRequest) Encode(e *Encoder) { e.UString(r.Path) }
func (r *GetACLRequest) Decode(d *Decoder) { r.Path = d.UString() }

// SetACLRequest replaces a node's ACL if Version (the aversion) matches.
type SetACLRequest struct {
	Path    string
	ACL     []ACL
	Version int32
}

func (r *SetACLRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	encodeACLs(e, r.ACL)
	e.Int32(r.Version)
}
func (r *SetACLRequest) Decode(d *Decoder) {
	r.Path = d.UString()
	r.ACL = decodeACLs(d)
	r.Version = d.Int32()
}

// SetACLResponse answers OpSetACL.
type SetACLResponse struct{ Stat Stat }

func (r *SetACLResponse) Encode(e *Encoder) { r.Stat.Encode(e) }
func (r *SetACLResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// AddWatchRequest sets a persistent or persistent-recursive watch.
type AddWatchRequest struct {
	Path string
	Mode AddWatchMode
}

func (r *AddWatchRequest) Encode(e *Encoder) { e.UString(r.Path); e.Int32(int32(r.Mode)) }
func (r *AddWatchRequest) Decode(d *Decoder) { r.Path = d.UString(); r.Mode = AddWatchMode(d.Int32()) }

// WatcherEvent is a watch notification, sent after a ReplyHeader with xid
// XidNotification.
type WatcherEvent struct {
	Type  EventType
	State KeeperState
	Path  string
}

func (r *WatcherEvent) Encode(e *Encoder) {
	e.Int32(int32(r.Type))
	e.Int32(int32(r.State))
	e.UString(r.Path)
}

func (r *WatcherEvent) Decode(d *Decoder) {
	r.Type = EventType(d.Int32())
	r.State = KeeperState(d.Int32())
	r.Path = d.UString()
}

// ErrorResponse is a failed op's result inside a multi response.
type ErrorResponse struct{ Err Code }

func (r *ErrorResponse) Encode(e *Encoder) { e.Int32(int32(r.Err)) }
func (r *ErrorResponse) Decode(d *Decoder) { r.Err = Code(d.Int32()) }

// CreateResponse answers OpCreate with the created path.
type CreateResponse struct{ Path string }

func (r *CreateResponse) Encode(e *Encoder) { e.UString(r.Path) }
func (r *CreateResponse) Decode(d *Decoder) { r.Path = d.UString() }

// Create2Response answers OpCreate2, OpCreateContainer and OpCreateTTL.
type Create2Response struct {
	Path string
	Stat Stat
}

func (r *Create2Response) Encode(e *Encoder) { e.UString(r.Path); r.Stat.Encode(e) }
func (r *Create2Response) Decode(d *Decoder) { r.Path = d.UString(); r.Stat.Decode(d) }

// ExistsRequest reads a node's Stat, optionally watching it even if absent.
type ExistsRequest struct {
	Path  string
	Watch bool
}

func (r *ExistsRequest) Encode(e *Encoder) { e.UString(r.Path); e.Bool(r.Watch) }
func (r *ExistsRequest) Decode(d *Decoder) { r.Path = d.UString(); r.Watch = d.Bool() }

// ExistsResponse answers OpExists.
type ExistsResponse struct{ Stat Stat }

func (r *ExistsResponse) Encode(e *Encoder) { r.Stat.Encode(e) }
func (r *ExistsResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// GetDataResponse answers OpGetData. Nil Data encodes as null, which is what
// ZooKeeper returns for a node created with null data.
type GetDataResponse struct {
	Data []byte
	Stat Stat
}

func (r *GetDataResponse) Encode(e *Encoder) { e.Buffer(r.Data); r.Stat.Encode(e) }
func (r *GetDataResponse) Decode(d *Decoder) { r.Data = d.Buffer(); r.Stat.Decode(d) }

// GetChildrenResponse answers OpGetChildren.
type GetChildrenResponse struct{ Children []string }

func (r *GetChildrenResponse) Encode(e *Encoder) { e.StringVector(r.Children) }
func (r *GetChildrenResponse) Decode(d *Decoder) { r.Children = d.StringVector() }

// GetAllChildrenNumberResponse answers OpGetAllChildrenNumber.
type GetAllChildrenNumberResponse struct{ TotalNumber int32 }

func (r *GetAllChildrenNumberResponse) Encode(e *Encoder) { e.Int32(r.TotalNumber) }
func (r *GetAllChildrenNumberResponse) Decode(d *Decoder) { r.TotalNumber = d.Int32() }

// GetChildren2Response answers OpGetChildren2.
type GetChildren2Response struct {
	Children []string
	Stat     Stat
}

func (r *GetChildren2Response) Encode(e *Encoder) { e.StringVector(r.Children); r.Stat.Encode(e) }
func (r *GetChildren2Response) Decode(d *Decoder) { r.Children = d.StringVector(); r.Stat.Decode(d) }

// GetACLResponse answers OpGetACL.
type GetACLResponse struct {
	ACL  []ACL
	Stat Stat
}

func (r *GetACLResponse) Encode(e *Encoder) { encodeACLs(e, r.ACL); r.Stat.Encode(e) }
func (r *GetACLResponse) Decode(d *Decoder) { r.ACL = decodeACLs(d); r.Stat.Decode(d) }

// CheckWatchesRequest asks whether watches of Type exist on Path.
type CheckWatchesRequest struct {
	Path string
	Type WatcherType
}

func (r *CheckWatchesRequest) Encode(e *Encoder) { e.UString(r.Path); e.Int32(int32(r.Type)) }
func (r *CheckWatchesRequest) Decode(d *Decoder) {
	r.Path = d.UString()
	r.Type = WatcherType(d.Int32())
}

// RemoveWatchesRequest removes the session's watches of Type on Path.
type RemoveWatchesRequest struct {
	Path string
	Type WatcherType
}

func (r *RemoveWatchesRequest) Encode(e *Encoder) { e.UString(r.Path); e.Int32(int32(r.Type)) }
func (r *RemoveWatchesRequest) Decode(d *Decoder) {
	r.Path = d.UString()
	r.Type = WatcherType(d.Int32())
}

// GetEphemeralsRequest lists the session's ephemeral nodes under a prefix.
type GetEphemeralsRequest struct{ PrefixPath string }

func (r *GetEphemeralsRequest) Encode(e *Encoder) { e.UString(r.PrefixPath) }
func (r *GetEphemeralsRequest) Decode(d *Decoder) { r.PrefixPath = d.UString() }

// GetEphemeralsResponse answers OpGetEphemerals.
type GetEphemeralsResponse struct{ Ephemerals []string }

func (r *GetEphemeralsResponse) Encode(e *Encoder) { e.StringVector(r.Ephemerals) }
func (r *GetEphemeralsResponse) Decode(d *Decoder) { r.Ephemerals = d.StringVector() }

// WhoAmIResponse answers OpWhoAmI (whose request has no body).
type WhoAmIResponse struct{ ClientInfo []ClientInfo }

// minClientInfoSize is two empty ustrings.
const minClientInfoSize = 8

func (r *WhoAmIResponse) Encode(e *Encoder) {
	e.VectorLen(len(r.ClientInfo))
	for i := range r.ClientInfo {
		r.ClientInfo[i].Encode(e)
	}
}

func (r *WhoAmIResponse) Decode(d *Decoder) {
	n := d.VectorLen(minClientInfoSize)
	if n < 0 || d.Err() != nil {
		r.ClientInfo = nil
		return
	}
	r.ClientInfo = make([]ClientInfo, n)
	for i := range r.ClientInfo {
		r.ClientInfo[i].Decode(d)
	}
	if d.Err() != nil {
		r.ClientInfo = nil
	}
}
