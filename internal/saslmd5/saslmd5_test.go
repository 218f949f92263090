package saslmd5

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestRFC2831Example is the worked example of RFC 2831 section 4: an IMAP
// login of chris with password secret.
func TestRFC2831Example(t *testing.T) {
	p := Params{User: "chris", Realm: "elwood.innosoft.com", Password: "secret",
		Nonce: "OA6MG9tEQGm2hh", CNonce: "OA6MHXh6VqTrRk", DigestURI: "imap/elwood.innosoft.com"}
	if got, want := p.Response("AUTHENTICATE"), "d388dad90d4bbd760a152321f2143af7"; got != want {
		t.Errorf("response = %s, want %s", got, want)
	}
	if got, want := p.Response(""), "ea40f60335c427b5527b84dbabcdfffd"; got != want {
		t.Errorf("rspauth = %s, want %s", got, want)
	}
}

// fixedNonce makes the server's nonce the base64 of sixteen 'n' bytes.
var fixedNonce = bytes.Repeat([]byte{'n'}, 16)

func users(u string) (string, bool) {
	p, ok := map[string]string{"kafka": "kafka-secret", "süper": "pässword"}[u]
	return p, ok
}

func TestExchange(t *testing.T) {
	for _, user := range []string{"kafka", "süper"} {
		s := NewServer("zookeeper", "zk-sasl-md5", users, bytes.NewReader(fixedNonce))
		challenge, done, err := s.Next(nil)
		if err != nil || done {
			t.Fatalf("%s: first step: done=%v err=%v", user, done, err)
		}
		if want := `realm="zk-sasl-md5",nonce="bm5ubm5ubm5ubm5ubm5ubg==",charset=utf-8,algorithm=md5-sess`; string(challenge) != want {
			t.Fatalf("challenge %q, want %q", challenge, want)
		}
		pw, _ := users(user)
		resp, err := Respond(challenge, user, pw, "zookeeper", "zk-sasl-md5", "client-nonce")
		if err != nil {
			t.Fatal(err)
		}
		rspauth, done, err := s.Next(resp)
		if err != nil || !done || s.User() != user {
			t.Fatalf("%s: second step: done=%v user=%q err=%v", user, done, s.User(), err)
		}
		p := Params{User: user, Realm: "zk-sasl-md5", Password: pw, Nonce: "bm5ubm5ubm5ubm5ubm5ubg==", CNonce: "client-nonce",
			DigestURI: "zookeeper/zk-sasl-md5", Authzid: user, HasAuthzid: true}
		if want := "rspauth=" + p.Response(""); string(rspauth) != want {
			t.Errorf("rspauth %q, want %q", rspauth, want)
		}
		if _, _, err := s.Next(nil); !errors.Is(err, ErrAuth) {
			t.Errorf("a third token: %v, want ErrAuth", err)
		}
	}
}

// TestRefused lists the responses the server refuses, each as the JDK's
// DigestMD5Server refuses it.
func TestRefused(t *testing.T) {
	good := func() string {
		s := NewServer("zookeeper", "zk-sasl-md5", users, bytes.NewReader(fixedNonce))
		c, _, _ := s.Next(nil)
		r, _ := Respond(c, "kafka", "kafka-secret", "zookeeper", "zk-sasl-md5", "cn")
		return string(r)
	}()
	for _, tc := range []struct {
		name, old, new string
	}{
		{"wrong password", "response=", "response=0"},
		{"unknown user", `username="kafka"`, `username="nobody"`},
		{"missing username", `username="kafka",`, ""},
		{"other realm", `realm="zk-sasl-md5"`, `realm="other"`},
		{"other nonce", `nonce="bm5u`, `nonce="xm5u`},
		{"missing cnonce", `cnonce="cn",`, ""},
		{"nonce count 2", "nc=00000001", "nc=00000002"},
		{"qop auth-conf", "qop=auth", "qop=auth-conf"},
		{"other service", `digest-uri="zookeeper/`, `digest-uri="imap/`},
		{"missing digest-uri", `digest-uri="zookeeper/zk-sasl-md5",`, ""},
		{"other charset", "charset=utf-8", "charset=latin1"},
		{"duplicate directive", `nc=00000001`, `nc=00000001,nc=00000001`},
		{"bad maxbuf", "maxbuf=65536", "maxbuf=lots"},
		{"unterminated quote", `authzid="kafka"`, `authzid="kafka`},
		{"garbage", good, "\x00\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer("zookeeper", "zk-sasl-md5", users, bytes.NewReader(fixedNonce))
			if _, _, err := s.Next(nil); err != nil {
				t.Fatal(err)
			}
			bad := strings.Replace(good, tc.old, tc.new, 1)
			if bad == good {
				t.Fatalf("%q not found in %q", tc.old, good)
			}
			if _, done, err := s.Next([]byte(bad)); !errors.Is(err, ErrAuth) || done || s.User() != "" {
				t.Errorf("%s: done=%v user=%q err=%v, want ErrAuth", bad, done, s.User(), err)
			}
		})
	}
	t.Run("initial response", func(t *testing.T) {
		s := NewServer("zookeeper", "zk-sasl-md5", users, nil)
		if _, _, err := s.Next([]byte(good)); !errors.Is(err, ErrAuth) {
			t.Errorf("a response before the challenge: %v, want ErrAuth", err)
		}
	})
	t.Run("too long", func(t *testing.T) {
		s := NewServer("zookeeper", "zk-sasl-md5", users, nil)
		_, _, _ = s.Next(nil)
		if _, _, err := s.Next(bytes.Repeat([]byte{'a'}, MaxResponse+1)); !errors.Is(err, ErrAuth) {
			t.Errorf("an oversized response: %v, want ErrAuth", err)
		}
	})
}

func TestParseDirectives(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		ok   bool
	}{
		{``, map[string]string{}, true},
		{`a=b`, map[string]string{"a": "b"}, true},
		{` , A = "x\"y" ,, b=c , `, map[string]string{"a": `x"y`, "b": "c"}, true},
		{`a="with,comma=and space"`, map[string]string{"a": "with,comma=and space"}, true},
		{`a=""`, map[string]string{"a": ""}, true},
		{`a=`, map[string]string{"a": ""}, true},
		{`a`, nil, false},
		{`=b`, nil, false},
		{`a=b c`, nil, false},
		{`a="b`, nil, false},
		{`a="b\`, nil, false},
		{`a=b,A=c`, nil, false},
	} {
		got, err := ParseDirectives([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("%q: err=%v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && !equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
