package saslmd5

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseDirectives: no input panics, and whatever parses, a server
// given it as a response refuses it or authenticates a known user only.
func FuzzParseDirectives(f *testing.F) {
	f.Add([]byte(`charset=utf-8,username="kafka",realm="zk-sasl-md5",nonce="bm5ubm5ubm5ubm5ubm5ubg==",nc=00000001,cnonce="cn",digest-uri="zookeeper/zk-sasl-md5",maxbuf=65536,response=0123,qop=auth,authzid="kafka"`))
	f.Add([]byte(`a="x\"y",,b=c`))
	f.Add([]byte(`a="b\`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := ParseDirectives(b); err == nil {
			for k := range d {
				if k == "" {
					t.Fatalf("%q: an empty directive name", b)
				}
			}
		} else if !errors.Is(err, ErrAuth) {
			t.Fatalf("%q: error %v does not wrap ErrAuth", b, err)
		}
		s := NewServer("zookeeper", "zk-sasl-md5", users, bytes.NewReader(fixedNonce))
		if _, _, err := s.Next(nil); err != nil {
			t.Fatal(err)
		}
		_, done, err := s.Next(b)
		if done {
			// Only a response computed from the password gets here.
			if _, ok := users(s.User()); !ok || err != nil {
				t.Fatalf("%q authenticated %q (err %v)", b, s.User(), err)
			}
		} else if !errors.Is(err, ErrAuth) {
			t.Fatalf("%q: refused with %v, not ErrAuth", b, err)
		}
	})
}
