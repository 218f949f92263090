package zkapi_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// fuzzMaxBuffer is the frame limit of the fuzzed server, small so that the
// fuzzer reaches the oversized-frame path with short inputs.
const fuzzMaxBuffer = 4096

// FuzzConnection feeds arbitrary byte streams to a live server, after a
// valid handshake or in place of one, and checks what ZooKeeper's rules
// make checkable from outside:
//
//   - the server never panics (a panic in any server goroutine fails the
//     fuzz run) and always ends the connection once the input ends;
//   - every complete request frame up to the first one that closes the
//     connection (a malformed header, an unknown opcode, closeSession, a
//     failed addAuth, an oversized length) is answered, in order, and
//     nothing after it is;
//   - another session on the same server keeps working.
//
// Run it with: go test ./zkapi -run '^$' -fuzz FuzzConnection -fuzztime 60s
func FuzzConnection(f *testing.F) {
	j := startJanus(f, zkapi.Config{MaxBuffer: fuzzMaxBuffer, FourLetterWhitelist: []string{"*"}})
	canary, _ := connect(f, j.Addr, 10*time.Second)
	for _, s := range connFuzzSeeds() {
		f.Add(s.handshake, s.input)
	}
	f.Fuzz(func(t *testing.T, handshake bool, input []byte) {
		nc, err := net.Dial("tcp", j.Addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(nc)
		if handshake {
			connectFrame, _ := jute.Marshal(nil, &jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16), HasReadOnly: true})
			if _, err := nc.Write(jute.AppendFrame(nil, connectFrame)); err != nil {
				t.Fatalf("write connect: %v", err)
			}
			frame, err := jute.ReadFrame(br, 1<<20)
			if err != nil {
				t.Fatalf("read connect response: %v", err)
			}
			var resp jute.ConnectResponse
			if err := jute.Unmarshal(frame, &resp); err != nil || resp.SessionID == 0 {
				t.Fatalf("connect response %+v: %v", resp, err)
			}
			// Close the session afterwards: thousands of sessions left to
			// expire together would keep the server busy revoking them.
			defer closeSession(t, j.Addr, resp)
		}
		// Write in the background: a server that closes early may stop
		// reading, and the input must not block the test.
		go func() {
			_, _ = nc.Write(input)
			_ = nc.(*net.TCPConn).CloseWrite()
		}()
		var got []jute.ReplyHeader
		var connectResp *jute.ConnectResponse
		var text []byte
		first := !handshake
		if first && is4lw(input) {
			text, err = io.ReadAll(br)
			if err != nil {
				t.Fatalf("reading four-letter-word answer: %v (server did not close)", err)
			}
		} else {
			for {
				frame, err := jute.ReadFrame(br, 1<<22)
				if errors.Is(err, io.EOF) || isReset(err) {
					break
				}
				if err != nil {
					t.Fatalf("after %d replies: %v (a server must answer whole frames and close)", len(got), err)
				}
				if first {
					first = false
					var cr jute.ConnectResponse
					if err := jute.Unmarshal(frame, &cr); err != nil {
						t.Fatalf("first frame is not a connect response: %v", err)
					}
					connectResp = &cr
					continue
				}
				var h jute.ReplyHeader
				if err := jute.Unmarshal(frame, &h); err != nil {
					t.Fatalf("reply %d is not a reply header: %v", len(got), err)
				}
				if h.Xid != jute.XidNotification {
					got = append(got, h)
				}
			}
		}
		checkConnAnswers(t, handshake, input, connectResp, text, got)

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { _, _, err := canary.Exists("/"); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("another session failed after this input: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("another session got no answer after this input")
		}
	})
}

// checkConnAnswers compares the replies with what the input's frames call for.
func checkConnAnswers(t *testing.T, handshake bool, input []byte, cr *jute.ConnectResponse, text []byte, got []jute.ReplyHeader) {
	t.Helper()
	if !handshake && is4lw(input) {
		if len(text) == 0 {
			t.Fatalf("four-letter word %q got no answer", input[:4])
		}
		return
	}
	frames := splitFrames(input)
	if !handshake {
		wantConnect := false
		if len(frames) > 0 {
			var req jute.ConnectRequest
			// Only a fresh session at zxid 0 is certain to be accepted; a
			// random session id or a client ahead of the server is refused.
			if jute.Unmarshal(frames[0], &req) == nil && req.SessionID == 0 && req.LastZxidSeen == 0 {
				wantConnect = true
			} else if jute.Unmarshal(frames[0], &req) == nil && req.SessionID != 0 {
				// A refused re-attach is answered (timeOut 0), then closed.
				if cr != nil && (cr.TimeOut != 0 || cr.SessionID != 0) {
					t.Fatalf("re-attach to unknown session 0x%x accepted: %+v", req.SessionID, cr)
				}
				if len(got) > 0 {
					t.Fatalf("%d replies after a refused re-attach", len(got))
				}
				return
			}
		}
		switch {
		case wantConnect && cr == nil:
			t.Fatalf("valid connect request %x got no connect response", frames[0])
		case !wantConnect && cr != nil && cr.SessionID != 0 && (len(frames) == 0 || !validConnect(frames[0])):
			t.Fatalf("connect response %+v to an invalid connect request", cr)
		}
		if cr == nil {
			if len(got) > 0 {
				t.Fatalf("%d replies without a session", len(got))
			}
			return
		}
		frames = frames[1:]
	}
	// Notifications share xid -1 with requests that use it, so both are
	// left out; an addAuth sent with xid -1 leaves its outcome unknown, and
	// then only what came before it is checked.
	var want []int32
	var wantOps []jute.OpCode
	prefixOnly := false
	for _, fr := range frames {
		if len(fr) < jute.RequestHeaderSize {
			break // malformed header: closed without an answer
		}
		xid := int32(binary.BigEndian.Uint32(fr))
		op := jute.OpCode(int32(binary.BigEndian.Uint32(fr[4:])))
		if op == jute.OpAuth && xid == jute.XidNotification {
			prefixOnly = true
			break
		}
		if op == jute.OpPing {
			xid = jute.XidPing // ZooKeeper answers every ping with PING_XID
		}
		if xid != jute.XidNotification {
			want = append(want, xid)
			wantOps = append(wantOps, op)
		}
		if _, known := jute.NewRequest(op); !known || op == jute.OpCreateSession || op == jute.OpCloseSession {
			break
		}
		if k := len(want) - 1; op == jute.OpAuth && k < len(got) && got[k].Err == jute.CodeAuthFailed {
			break
		}
	}
	var gotXids []int32
	for _, h := range got {
		gotXids = append(gotXids, h.Xid)
	}
	if prefixOnly && len(gotXids) >= len(want) {
		gotXids = gotXids[:len(want)]
	}
	if !slices.Equal(gotXids, want) {
		t.Fatalf("reply xids %v, want %v (ops %v)", gotXids, want, wantOps)
	}
	if n := len(wantOps); n > 0 && len(got) > 0 {
		last, op := got[len(got)-1], wantOps[n-1]
		if _, known := jute.NewRequest(op); (!known || op == jute.OpCreateSession) && last.Err != jute.CodeUnimplemented {
			t.Fatalf("unknown opcode %d answered %d, want %d", op, last.Err, jute.CodeUnimplemented)
		}
	}
}

// closeSession re-attaches to a session and closes it, unless the input
// closed it already.
func closeSession(t *testing.T, addr string, s jute.ConnectResponse) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(nc)
	connect, _ := jute.Marshal(nil, &jute.ConnectRequest{TimeOut: s.TimeOut, SessionID: s.SessionID, Passwd: s.Passwd})
	closeReq, _ := jute.Marshal(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpCloseSession})
	if _, err := nc.Write(jute.AppendFrame(jute.AppendFrame(nil, connect), closeReq)); err != nil {
		t.Fatalf("write closeSession: %v", err)
	}
	// Read until the server hangs up: after the close reply, or at once if
	// the session is gone.
	for {
		if _, err := jute.ReadFrame(br, 1<<20); err != nil {
			if !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("closing session 0x%x: %v", s.SessionID, err)
			}
			return
		}
	}
}

func validConnect(frame []byte) bool {
	var req jute.ConnectRequest
	return jute.Unmarshal(frame, &req) == nil
}

// splitFrames cuts the complete frames the server reads from input, stopping
// at a length it refuses (which closes the connection) or an incomplete tail.
func splitFrames(input []byte) [][]byte {
	var out [][]byte
	for len(input) >= 4 {
		n := int32(binary.BigEndian.Uint32(input))
		if n < 0 || int(n) > fuzzMaxBuffer || len(input)-4 < int(n) {
			break
		}
		out = append(out, input[4:4+n])
		input = input[4+n:]
	}
	return out
}

func is4lw(input []byte) bool {
	if len(input) < 4 {
		return false
	}
	switch string(input[:4]) {
	case "conf", "cons", "crst", "dump", "envi", "gtmk", "ruok", "stmk", "srst", "srvr", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash", "dirs":
		return true
	}
	return false
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

type connFuzzSeed struct {
	handshake bool
	input     []byte
}

// connFuzzSeeds are well-formed and malformed streams: every request type,
// pipelined requests, bad lengths, truncated frames and four-letter words.
func connFuzzSeeds() []connFuzzSeed {
	req := func(xid int32, op jute.OpCode, body jute.Record) []byte {
		e := jute.NewEncoder(nil)
		start := e.BeginFrame()
		(&jute.RequestHeader{Xid: xid, Type: op}).Encode(e)
		if body != nil {
			body.Encode(e)
		}
		e.EndFrame(start)
		return e.Bytes()
	}
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
	reqs := [][]byte{
		req(1, jute.OpCreate, &jute.CreateRequest{Path: "/fz", Data: []byte("d"), ACL: acl}),
		req(2, jute.OpCreate2, &jute.CreateRequest{Path: "/fz/s-", ACL: acl, Flags: jute.ModeEphemeralSequential}),
		req(3, jute.OpGetData, &jute.GetDataRequest{Path: "/fz", Watch: true}),
		req(4, jute.OpSetData, &jute.SetDataRequest{Path: "/fz", Data: []byte("e"), Version: -1}),
		req(5, jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/fz", Watch: true}),
		req(6, jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
			{Type: jute.OpCheck, Request: &jute.CheckVersionRequest{Path: "/fz", Version: 1}},
			{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: "/fz", Version: -1}},
		}}),
		req(7, jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.MultiOp{
			{Type: jute.OpGetData, Request: &jute.GetDataRequest{Path: "/fz"}},
			{Type: jute.OpGetChildren, Request: &jute.GetChildrenRequest{Path: "/nope"}},
		}}),
		req(8, jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/fzt", ACL: acl, Flags: jute.ModePersistentWithTTL, TTL: 100}),
		req(9, jute.OpAddWatch, &jute.AddWatchRequest{Path: "/", Mode: jute.AddWatchPersistentRecursive}),
		req(10, jute.OpSetWatches2, &jute.SetWatches2{DataWatches: []string{"/fz"}, ChildWatches: []string{"/"}}),
		req(11, jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: "/"}),
		req(12, jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: "/"}),
		req(-2, jute.OpPing, nil),
		req(13, jute.OpSync, &jute.SyncRequest{Path: "/"}),
		req(14, jute.OpWhoAmI, nil),
		req(15, jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: "/fz", Type: jute.WatcherAny}),
		req(16, jute.OpGetACL, &jute.GetACLRequest{Path: "/zookeeper/config"}),
		req(17, jute.OpSetACL, &jute.SetACLRequest{Path: "/fz", ACL: acl, Version: 0}),
		req(18, jute.OpDelete, &jute.DeleteRequest{Path: "/fz/s-0000000000", Version: -1}),
	}
	seeds := []connFuzzSeed{
		{true, nil},
		{true, slices.Concat(reqs...)},
		{true, req(-4, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("u:p")})},
		{true, slices.Concat(req(-4, jute.OpAuth, &jute.AuthPacket{Scheme: "nope", Auth: []byte("x")}), reqs[0])},
		{true, slices.Concat(req(1, jute.OpCloseSession, nil), reqs[1])},
		{true, slices.Concat(req(1, 999, nil), reqs[1])},
		{true, []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1}},
		{true, []byte{0xff, 0xff, 0xff, 0xff}},
		{true, []byte{0, 0, 0, 3, 1, 2, 3}},
		{true, reqs[5][:len(reqs[5])-3]},
		{false, []byte("ruok")},
		{false, []byte("mntr")},
		{false, []byte("stat")},
		{false, nil},
		{false, []byte{0, 0, 0, 1, 0}},
	}
	for _, cr := range []jute.ConnectRequest{
		{TimeOut: 30000, Passwd: make([]byte, 16)},
		{TimeOut: 1, Passwd: make([]byte, 16), HasReadOnly: true, ReadOnly: true},
		{TimeOut: 30000, SessionID: 0x1234, Passwd: make([]byte, 16)},
		{TimeOut: 30000, LastZxidSeen: 1 << 40, Passwd: make([]byte, 16)},
	} {
		body, _ := jute.Marshal(nil, &cr)
		seeds = append(seeds, connFuzzSeed{false, slices.Concat(jute.AppendFrame(nil, body), reqs[10])})
	}
	return seeds
}
