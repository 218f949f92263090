package zkapi_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/januskv/janus/internal/saslmd5"
	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// FuzzSASLRequest sends a session's SASL requests with arbitrary bodies to
// a live server that has SASL users: first a body as raw bytes, then two
// well-formed requests with arbitrary tokens, each followed by whoAmI. It
// checks what ZooKeeper's processSasl makes checkable: a body that does
// not decode is MarshallingError; an empty opening token gets a challenge;
// any other token is AuthFailed and ends the connection; no input makes
// the session a SASL user (the fuzzer cannot know the nonce, let alone
// the password's digest); another session keeps working.
//
// Run it with: go test ./zkapi -run '^$' -fuzz FuzzSASLRequest -fuzztime 60s
func FuzzSASLRequest(f *testing.F) {
	j := startJanus(f, zkapi.Config{SASLUsers: map[string]string{"kafka": "kafka-secret"}})
	resp, _ := saslmd5.Respond([]byte(`realm="zk-sasl-md5",nonce="n",charset=utf-8,algorithm=md5-sess`), "kafka", "kafka-secret", "zookeeper", "zk-sasl-md5", "c")
	for _, s := range []struct{ raw, t1, t2 []byte }{
		{[]byte{0, 0, 0, 0}, []byte{}, resp},
		{[]byte{0xff, 0xff, 0xff, 0xff}, nil, []byte(`username="kafka"`)},
		{[]byte{0, 0, 0, 9, 'x'}, []byte("x"), nil},
		{nil, []byte{}, []byte{}},
	} {
		f.Add(s.raw, s.t1, s.t2)
	}
	f.Fuzz(func(t *testing.T, raw, t1, t2 []byte) {
		// The raw body, then whoAmI.
		frame := func(xid int32, op jute.OpCode, body []byte) []byte {
			hdr, _ := jute.Marshal(nil, &jute.RequestHeader{Xid: xid, Type: op})
			return jute.AppendFrame(nil, append(hdr, body...))
		}
		var decoded jute.GetSASLRequest
		decodeErr := jute.Unmarshal(raw, &decoded)
		wantFirst := jute.CodeOk
		switch {
		case decodeErr != nil:
			wantFirst = jute.CodeMarshallingError
		case len(decoded.Token) > 0:
			wantFirst = jute.CodeAuthFailed
		}
		got := saslSession(t, j.Addr, slices.Concat(frame(1, jute.OpSASL, raw), frame(2, jute.OpWhoAmI, nil)))
		checkSASLReplies(t, got, []jute.Code{wantFirst})

		// Two well-formed requests, then whoAmI.
		body := func(tok []byte) []byte { b, _ := jute.Marshal(nil, &jute.GetSASLRequest{Token: tok}); return b }
		got = saslSession(t, j.Addr, slices.Concat(frame(1, jute.OpSASL, body(t1)), frame(2, jute.OpSASL, body(t2)), frame(3, jute.OpWhoAmI, nil)))
		want := []jute.Code{jute.CodeAuthFailed}
		if len(t1) == 0 {
			want = []jute.Code{jute.CodeOk, jute.CodeAuthFailed}
		}
		checkSASLReplies(t, got, want)

		// A fresh session is still served. (A long-lived go-zookeeper
		// canary would depend on its pings getting through while the
		// fuzzer pauses the process.)
		if got := saslSession(t, j.Addr, frame(2, jute.OpWhoAmI, nil)); len(got) != 2 || got[0].hdr.Err != jute.CodeOk {
			t.Fatalf("another session after this input got %+v", got)
		}
	})
}

// saslReply is one reply a fuzzed session got.
type saslReply struct {
	hdr jute.ReplyHeader
	who []jute.ClientInfo
}

// saslSession opens a session, sends input after the handshake and
// returns the replies until the server closes the connection (closing
// the session on the way out if it is still open).
func saslSession(t *testing.T, addr string, input []byte) []saslReply {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(nc)
	connect, _ := jute.Marshal(nil, &jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)})
	closeReq, _ := jute.Marshal(nil, &jute.RequestHeader{Xid: 99, Type: jute.OpCloseSession})
	if _, err := nc.Write(slices.Concat(jute.AppendFrame(nil, connect), input, jute.AppendFrame(nil, closeReq))); err != nil {
		t.Fatal(err)
	}
	if _, err := jute.ReadFrame(br, 1<<20); err != nil {
		t.Fatalf("connect response: %v", err)
	}
	var out []saslReply
	for {
		frame, err := jute.ReadFrame(br, 1<<20)
		if errors.Is(err, io.EOF) || isReset(err) {
			return out
		}
		if err != nil {
			t.Fatalf("after %d replies: %v", len(out), err)
		}
		d := jute.NewDecoder(frame)
		var r saslReply
		r.hdr.Decode(d)
		if r.hdr.Xid == 2 || r.hdr.Xid == 3 {
			var who jute.WhoAmIResponse
			who.Decode(d)
			r.who = who.ClientInfo
		}
		out = append(out, r)
	}
}

// checkSASLReplies checks the SASL replies' codes: after AuthFailed
// nothing more is answered; otherwise whoAmI and closeSession follow, and
// whoAmI shows no SASL identity.
func checkSASLReplies(t *testing.T, got []saslReply, want []jute.Code) {
	t.Helper()
	var codes []jute.Code
	for _, r := range got {
		codes = append(codes, r.hdr.Err)
	}
	failed := want[len(want)-1] == jute.CodeAuthFailed
	n := len(want)
	if !failed {
		n += 2 // whoAmI, closeSession
	}
	if len(got) != n || !slices.Equal(codes[:len(want)], want) {
		t.Fatalf("replies %v, want %v then %s", codes, want, map[bool]string{true: "the end", false: "whoAmI and closeSession"}[failed])
	}
	for _, r := range got {
		for _, ci := range r.who {
			if ci.AuthScheme == "sasl" || ci.AuthScheme == "super" {
				t.Fatalf("a fuzzed session became %s:%s", ci.AuthScheme, ci.User)
			}
		}
	}
}
