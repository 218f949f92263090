package jute

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var sampleStat = Stat{
	Czxid:          0x100000001,
	Mzxid:          0x100000007,
	Ctime:          1700000000123,
	Mtime:          1700000009999,
	Version:        3,
	Cversion:       -1,
	Aversion:       2,
	EphemeralOwner: 0x7f00000000000001,
	DataLength:     5,
	NumChildren:    0,
	Pzxid:          0x100000002,
}

var worldAnyone = []ACL{{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}}}

// roundTripCases holds one value of every record, with every vector
// non-nil (the encoder writes nil vectors as empty, so they decode non-nil).
func roundTripCases() []struct {
	name  string
	value Record
	empty Record
} {
	return []struct {
		name  string
		value Record
		empty Record
	}{
		{"ID", &ID{Scheme: "digest", ID: "bob:abc="}, new(ID)},
		{"ACL", &ACL{Perms: PermRead | PermAdmin, ID: ID{Scheme: "ip", ID: "10.0.0.0/8"}}, new(ACL)},
		{"Stat", &sampleStat, new(Stat)},
		{"ClientInfo", &ClientInfo{AuthScheme: "ip", User: "127.0.0.1"}, new(ClientInfo)},
		{"ConnectRequest/readOnly", &ConnectRequest{LastZxidSeen: 9, TimeOut: 30000, SessionID: 77, Passwd: []byte("0123456789abcdef"), ReadOnly: true, HasReadOnly: true}, new(ConnectRequest)},
		{"ConnectRequest/old client", &ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)}, new(ConnectRequest)},
		{"ConnectResponse/readOnly", &ConnectResponse{TimeOut: 4000, SessionID: -5, Passwd: []byte{1, 2}, HasReadOnly: true}, new(ConnectResponse)},
		{"ConnectResponse/old client", &ConnectResponse{TimeOut: 4000, SessionID: 5, Passwd: []byte{}}, new(ConnectResponse)},
		{"SetWatches", &SetWatches{RelativeZxid: 12, DataWatches: []string{"/a"}, ExistWatches: []string{}, ChildWatches: []string{"/", "/b/c"}}, new(SetWatches)},
		{"SetWatches2", &SetWatches2{RelativeZxid: -1, DataWatches: []string{}, ExistWatches: []string{"/x"}, ChildWatches: []string{}, PersistentWatches: []string{"/p"}, PersistentRecursiveWatches: []string{"/r", "/s"}}, new(SetWatches2)},
		{"RequestHeader", &RequestHeader{Xid: 42, Type: OpGetData}, new(RequestHeader)},
		{"MultiHeader", &MultiHeader{Type: OpError, Done: true, Err: CodeNoNode}, new(MultiHeader)},
		{"AuthPacket", &AuthPacket{Scheme: "digest", Auth: []byte("bob:secret")}, new(AuthPacket)},
		{"ReplyHeader", &ReplyHeader{Xid: -1, Zxid: -1, Err: CodeSessionExpired}, new(ReplyHeader)},
		{"GetDataRequest", &GetDataRequest{Path: "/a/b", Watch: true}, new(GetDataRequest)},
		{"SetDataRequest", &SetDataRequest{Path: "/a", Data: []byte("v"), Version: -1}, new(SetDataRequest)},
		{"SetDataRequest/null data", &SetDataRequest{Path: "/a", Version: 4}, new(SetDataRequest)},
		{"ReconfigRequest", &ReconfigRequest{JoiningServers: "server.4=h:2888:3888", NewMembers: "", CurConfigID: -1}, new(ReconfigRequest)},
		{"SetDataResponse", &SetDataResponse{Stat: sampleStat}, new(SetDataResponse)},
		{"GetSASLRequest", &GetSASLRequest{Token: []byte{0, 1}}, new(GetSASLRequest)},
		{"SetSASLResponse", &SetSASLResponse{Token: []byte{}}, new(SetSASLResponse)},
		{"CreateRequest", &CreateRequest{Path: "/lock-", Data: []byte{}, ACL: worldAnyone, Flags: ModeEphemeralSequential}, new(CreateRequest)},
		{"CreateRequest/empty ACL", &CreateRequest{Path: "/c", ACL: []ACL{}, Flags: ModeContainer}, new(CreateRequest)},
		{"CreateTTLRequest", &CreateTTLRequest{Path: "/t", Data: []byte("x"), ACL: worldAnyone, Flags: ModePersistentWithTTL, TTL: 60000}, new(CreateTTLRequest)},
		{"DeleteRequest", &DeleteRequest{Path: "/a", Version: 7}, new(DeleteRequest)},
		{"GetChildrenRequest", &GetChildrenRequest{Path: "/", Watch: true}, new(GetChildrenRequest)},
		{"GetAllChildrenNumberRequest", &GetAllChildrenNumberRequest{Path: "/q"}, new(GetAllChildrenNumberRequest)},
		{"GetChildren2Request", &GetChildren2Request{Path: "/q"}, new(GetChildren2Request)},
		{"CheckVersionRequest", &CheckVersionRequest{Path: "/q", Version: 0}, new(CheckVersionRequest)},
		{"SyncRequest", &SyncRequest{Path: "/"}, new(SyncRequest)},
		{"SyncResponse", &SyncResponse{Path: "/"}, new(SyncResponse)},
		{"GetACLRequest", &GetACLRequest{Path: "/z"}, new(GetACLRequest)},
		{"SetACLRequest", &SetACLRequest{Path: "/z", ACL: append(worldAnyone, ACL{Perms: PermRead, ID: ID{Scheme: "auth"}}), Version: 1}, new(SetACLRequest)},
		{"SetACLResponse", &SetACLResponse{Stat: sampleStat}, new(SetACLResponse)},
		{"AddWatchRequest", &AddWatchRequest{Path: "/w", Mode: AddWatchPersistentRecursive}, new(AddWatchRequest)},
		{"WatcherEvent", &WatcherEvent{Type: EventNodeChildrenChanged, State: StateSyncConnected, Path: "/w"}, new(WatcherEvent)},
		{"ErrorResponse", &ErrorResponse{Err: CodeBadVersion}, new(ErrorResponse)},
		{"CreateResponse", &CreateResponse{Path: "/lock-0000000007"}, new(CreateResponse)},
		{"Create2Response", &Create2Response{Path: "/n", Stat: sampleStat}, new(Create2Response)},
		{"ExistsRequest", &ExistsRequest{Path: "/maybe", Watch: true}, new(ExistsRequest)},
		{"ExistsResponse", &ExistsResponse{Stat: sampleStat}, new(ExistsResponse)},
		{"GetDataResponse", &GetDataResponse{Data: []byte("hello"), Stat: sampleStat}, new(GetDataResponse)},
		{"GetDataResponse/null data", &GetDataResponse{Stat: sampleStat}, new(GetDataResponse)},
		{"GetChildrenResponse", &GetChildrenResponse{Children: []string{"a", "b"}}, new(GetChildrenResponse)},
		{"GetAllChildrenNumberResponse", &GetAllChildrenNumberResponse{TotalNumber: 12}, new(GetAllChildrenNumberResponse)},
		{"GetChildren2Response", &GetChildren2Response{Children: []string{}, Stat: sampleStat}, new(GetChildren2Response)},
		{"GetACLResponse", &GetACLResponse{ACL: worldAnyone, Stat: sampleStat}, new(GetACLResponse)},
		{"CheckWatchesRequest", &CheckWatchesRequest{Path: "/w", Type: WatcherAny}, new(CheckWatchesRequest)},
		{"RemoveWatchesRequest", &RemoveWatchesRequest{Path: "/w", Type: WatcherData}, new(RemoveWatchesRequest)},
		{"GetEphemeralsRequest", &GetEphemeralsRequest{PrefixPath: "/app"}, new(GetEphemeralsRequest)},
		{"GetEphemeralsResponse", &GetEphemeralsResponse{Ephemerals: []string{"/app/e1"}}, new(GetEphemeralsResponse)},
		{"WhoAmIResponse", &WhoAmIResponse{ClientInfo: []ClientInfo{{AuthScheme: "ip", User: "127.0.0.1"}, {AuthScheme: "digest", User: "bob"}}}, new(WhoAmIResponse)},
		{"MultiRequest/write", &MultiRequest{Ops: []MultiOp{
			{Type: OpCreate, Request: &CreateRequest{Path: "/m", Data: []byte("d"), ACL: worldAnyone, Flags: ModePersistent}},
			{Type: OpCreate2, Request: &CreateRequest{Path: "/m2", ACL: worldAnyone}},
			{Type: OpCreateContainer, Request: &CreateRequest{Path: "/c", ACL: worldAnyone, Flags: ModeContainer}},
			{Type: OpCreateTTL, Request: &CreateTTLRequest{Path: "/t", ACL: worldAnyone, Flags: ModePersistentWithTTL, TTL: 5}},
			{Type: OpSetData, Request: &SetDataRequest{Path: "/m", Data: []byte("e"), Version: 0}},
			{Type: OpCheck, Request: &CheckVersionRequest{Path: "/m", Version: 1}},
			{Type: OpDelete, Request: &DeleteRequest{Path: "/m", Version: -1}},
		}}, new(MultiRequest)},
		{"MultiRequest/read", &MultiRequest{Ops: []MultiOp{
			{Type: OpGetData, Request: &GetDataRequest{Path: "/a"}},
			{Type: OpGetChildren, Request: &GetChildrenRequest{Path: "/"}},
		}}, new(MultiRequest)},
		{"MultiResponse", &MultiResponse{Results: []MultiResult{
			{Type: OpCreate, Path: "/m"},
			{Type: OpCreate2, Path: "/m2", Stat: sampleStat},
			{Type: OpSetData, Stat: sampleStat},
			{Type: OpCheck},
			{Type: OpDelete},
			{Type: OpGetData, Data: []byte("x"), Stat: sampleStat},
			{Type: OpGetChildren, Children: []string{"k"}},
			{Type: OpError, Err: CodeNoNode},
		}}, new(MultiResponse)},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Marshal(nil, tc.value)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			d := NewDecoder(b)
			tc.empty.Decode(d)
			if err := d.Err(); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d.Remaining() != 0 {
				t.Errorf("Decode left %d of %d bytes unread", d.Remaining(), len(b))
			}
			if !reflect.DeepEqual(tc.value, tc.empty) {
				t.Errorf("round trip changed the record:\n got %+v\nwant %+v", tc.empty, tc.value)
			}
			// Every strict prefix of a record is truncated input and must fail
			// cleanly, except where the record's last field is optional.
			for n := 0; n < len(b); n++ {
				fresh := reflect.New(reflect.TypeOf(tc.empty).Elem()).Interface().(Record)
				err := Unmarshal(b[:n], fresh)
				if err == nil && !optionalTail(tc.value, n, len(b)) {
					t.Errorf("Unmarshal of %d-byte prefix of %d succeeded", n, len(b))
				}
			}
		})
	}
}

// optionalTail reports whether cutting a record to n of full bytes leaves it
// valid: only the connect records' trailing readOnly byte may be missing.
func optionalTail(r Record, n, full int) bool {
	switch r := r.(type) {
	case *ConnectRequest:
		return r.HasReadOnly && n == full-1
	case *ConnectResponse:
		return r.HasReadOnly && n == full-1
	}
	return false
}

func TestNilVectorsEncodeEmpty(t *testing.T) {
	b, err := Marshal(nil, &GetChildrenResponse{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 0}; !bytes.Equal(b, want) {
		t.Fatalf("nil children encoded as %x, want %x", b, want)
	}
	var r GetChildrenResponse
	if err := Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Children == nil || len(r.Children) != 0 {
		t.Fatalf("decoded children = %#v, want empty non-nil", r.Children)
	}
	// Null (-1) vectors and buffers from the wire decode as nil.
	var n GetChildrenResponse
	if err := Unmarshal([]byte{0xff, 0xff, 0xff, 0xff}, &n); err != nil || n.Children != nil {
		t.Fatalf("null vector decoded as %#v, %v; want nil, nil", n.Children, err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad golden hex: %v", err)
	}
	return b
}

// TestGolden checks whole frames against bytes worked out by hand from the
// jute definitions, so an encoder and decoder that agree with each other but
// not with ZooKeeper cannot pass.
func TestGolden(t *testing.T) {
	passwd := make([]byte, 16)
	tests := []struct {
		name    string
		records []Record
		golden  string
	}{
		{
			name:    "ConnectRequest without readOnly (pre-3.4 client)",
			records: []Record{&ConnectRequest{LastZxidSeen: 5, TimeOut: 30000, Passwd: passwd}},
			golden: `0000002c
				00000000 0000000000000005 00007530 0000000000000000
				00000010 00000000000000000000000000000000`,
		},
		{
			name:    "ConnectRequest with readOnly",
			records: []Record{&ConnectRequest{LastZxidSeen: 5, TimeOut: 30000, Passwd: passwd, ReadOnly: true, HasReadOnly: true}},
			golden: `0000002d
				00000000 0000000000000005 00007530 0000000000000000
				00000010 00000000000000000000000000000000 01`,
		},
		{
			name: "ConnectResponse with readOnly false",
			records: []Record{&ConnectResponse{TimeOut: 4000, SessionID: 0x0100000000000001,
				Passwd: bytes.Repeat([]byte{0xaa}, 16), HasReadOnly: true}},
			golden: `00000025
				00000000 00000fa0 0100000000000001
				00000010 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 00`,
		},
		{
			name: "create2 request",
			records: []Record{
				&RequestHeader{Xid: 1, Type: OpCreate2},
				&CreateRequest{Path: "/a", Data: []byte("hi"), ACL: worldAnyone, Flags: ModeEphemeral},
			},
			golden: `00000033
				00000001 0000000f
				00000002 2f61
				00000002 6869
				00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65
				00000001`,
		},
		{
			name: "failed multi: ok, NoNode, RuntimeInconsistency",
			records: []Record{
				&ReplyHeader{Xid: 7, Zxid: 0x200000003, Err: CodeOk},
				&MultiResponse{Results: []MultiResult{
					{Type: OpError, Err: CodeOk},
					{Type: OpError, Err: CodeNoNode},
					{Type: OpError, Err: CodeRuntimeInconsistency},
				}},
			},
			golden: `00000040
				00000007 0000000200000003 00000000
				ffffffff 00 00000000 00000000
				ffffffff 00 ffffff9b ffffff9b
				ffffffff 00 fffffffe fffffffe
				ffffffff 01 ffffffff`,
		},
		{
			name: "multi request: check then delete",
			records: []Record{
				&RequestHeader{Xid: 2, Type: OpMulti},
				&MultiRequest{Ops: []MultiOp{
					{Type: OpCheck, Request: &CheckVersionRequest{Path: "/a", Version: 3}},
					{Type: OpDelete, Request: &DeleteRequest{Path: "/a", Version: -1}},
				}},
			},
			golden: `00000037
				00000002 0000000e
				0000000d 00 ffffffff 00000002 2f61 00000003
				00000002 00 ffffffff 00000002 2f61 ffffffff
				ffffffff 01 ffffffff`,
		},
		{
			name: "watch notification",
			records: []Record{
				&ReplyHeader{Xid: XidNotification, Zxid: -1, Err: CodeOk},
				&WatcherEvent{Type: EventNodeDeleted, State: StateSyncConnected, Path: "/a"},
			},
			golden: `0000001e
				ffffffff ffffffffffffffff 00000000
				00000002 00000003 00000002 2f61`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := unhex(t, tc.golden)
			e := NewEncoder(nil)
			start := e.BeginFrame()
			for _, r := range tc.records {
				r.Encode(e)
			}
			e.EndFrame(start)
			if err := e.Err(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(e.Bytes(), want) {
				t.Fatalf("encoded\n%x\nwant\n%x", e.Bytes(), want)
			}
			// Decode the golden body back into fresh records and re-encode.
			d := NewDecoder(want[4:])
			var again []byte
			for _, r := range tc.records {
				fresh := reflect.New(reflect.TypeOf(r).Elem()).Interface().(Record)
				fresh.Decode(d)
				if !reflect.DeepEqual(fresh, r) {
					t.Errorf("decoded %+v, want %+v", fresh, r)
				}
				again, _ = Marshal(again, fresh)
			}
			if err := d.Err(); err != nil || d.Remaining() != 0 {
				t.Fatalf("decoding golden: err %v, %d bytes left", err, d.Remaining())
			}
			if !bytes.Equal(AppendFrame(nil, again), want) {
				t.Errorf("re-encoded\n%x\nwant\n%x", AppendFrame(nil, again), want)
			}
		})
	}
}

func TestMultiRequestRejects(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"op type not allowed in a multi", `00000003 00 ffffffff 00000002 2f61 00`},
		{"write after read", `00000004 00 ffffffff 00000002 2f61 00  00000002 00 ffffffff 00000002 2f61 ffffffff  ffffffff 01 ffffffff`},
		{"read after write", `00000002 00 ffffffff 00000002 2f61 ffffffff  00000008 00 ffffffff 00000002 2f61 00  ffffffff 01 ffffffff`},
		{"missing end marker", `00000002 00 ffffffff 00000002 2f61 ffffffff`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m MultiRequest
			err := Unmarshal(unhex(t, tc.body), &m)
			if err == nil {
				t.Fatalf("decoded %+v, want an error", m)
			}
			if m.Ops != nil {
				t.Errorf("ops kept after error: %+v", m.Ops)
			}
		})
	}
	var m MultiRequest
	if err := Unmarshal(unhex(t, tests[0].body), &m); !errors.Is(err, ErrInvalidMulti) {
		t.Errorf("invalid op type: err %v, want ErrInvalidMulti", err)
	}
}

func TestMultiEncodeRejectsBadTypes(t *testing.T) {
	for _, r := range []Record{
		&MultiResponse{Results: []MultiResult{{Type: OpExists}}},
		&MultiRequest{Ops: []MultiOp{{Type: OpExists, Request: &ExistsRequest{Path: "/"}}}},
		&MultiRequest{Ops: []MultiOp{{Type: OpDelete}}},
	} {
		if _, err := Marshal(nil, r); !errors.Is(err, ErrInvalidMulti) {
			t.Errorf("Marshal(%+v) err = %v, want ErrInvalidMulti", r, err)
		}
	}
}

func TestNewRequestAndResponseCoverOpcodes(t *testing.T) {
	tests := []struct {
		op            OpCode
		req, resp     string // record type names; "" for no body
		reqOK, respOK bool
	}{
		{OpCreate, "*jute.CreateRequest", "*jute.CreateResponse", true, true},
		{OpCreate2, "*jute.CreateRequest", "*jute.Create2Response", true, true},
		{OpCreateContainer, "*jute.CreateRequest", "*jute.Create2Response", true, true},
		{OpCreateTTL, "*jute.CreateTTLRequest", "*jute.Create2Response", true, true},
		{OpDelete, "*jute.DeleteRequest", "", true, true},
		{OpExists, "*jute.ExistsRequest", "*jute.ExistsResponse", true, true},
		{OpGetData, "*jute.GetDataRequest", "*jute.GetDataResponse", true, true},
		{OpSetData, "*jute.SetDataRequest", "*jute.SetDataResponse", true, true},
		{OpGetACL, "*jute.GetACLRequest", "*jute.GetACLResponse", true, true},
		{OpSetACL, "*jute.SetACLRequest", "*jute.SetACLResponse", true, true},
		{OpGetChildren, "*jute.GetChildrenRequest", "*jute.GetChildrenResponse", true, true},
		{OpGetChildren2, "*jute.GetChildren2Request", "*jute.GetChildren2Response", true, true},
		{OpSync, "*jute.SyncRequest", "*jute.SyncResponse", true, true},
		{OpCheck, "*jute.CheckVersionRequest", "*jute.SetDataResponse", true, true},
		{OpMulti, "*jute.MultiRequest", "*jute.MultiResponse", true, true},
		{OpMultiRead, "*jute.MultiRequest", "*jute.MultiResponse", true, true},
		{OpReconfig, "*jute.ReconfigRequest", "*jute.GetDataResponse", true, true},
		{OpCheckWatches, "*jute.CheckWatchesRequest", "", true, true},
		{OpRemoveWatches, "*jute.RemoveWatchesRequest", "", true, true},
		{OpAuth, "*jute.AuthPacket", "", true, true},
		{OpSetWatches, "*jute.SetWatches", "", true, true},
		{OpSetWatches2, "*jute.SetWatches2", "", true, true},
		{OpSASL, "*jute.GetSASLRequest", "*jute.SetSASLResponse", true, true},
		{OpGetEphemerals, "*jute.GetEphemeralsRequest", "*jute.GetEphemeralsResponse", true, true},
		{OpGetAllChildrenNumber, "*jute.GetAllChildrenNumberRequest", "*jute.GetAllChildrenNumberResponse", true, true},
		{OpAddWatch, "*jute.AddWatchRequest", "", true, true},
		{OpWhoAmI, "", "*jute.WhoAmIResponse", true, true},
		{OpPing, "", "", true, true},
		{OpCloseSession, "", "", true, true},
		{OpNotification, "", "*jute.WatcherEvent", false, true},
		{OpDeleteContainer, "", "", false, false},
		{OpError, "", "", false, false},
		{10, "", "", false, false},
		{99, "", "", false, false},
	}
	name := func(r Record) string {
		if r == nil {
			return ""
		}
		return reflect.TypeOf(r).String()
	}
	for _, tc := range tests {
		req, ok := NewRequest(tc.op)
		if name(req) != tc.req || ok != tc.reqOK {
			t.Errorf("NewRequest(%v) = %s, %v; want %s, %v", tc.op, name(req), ok, tc.req, tc.reqOK)
		}
		resp, ok := NewResponse(tc.op)
		if name(resp) != tc.resp || ok != tc.respOK {
			t.Errorf("NewResponse(%v) = %s, %v; want %s, %v", tc.op, name(resp), ok, tc.resp, tc.respOK)
		}
	}
}
