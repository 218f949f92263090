package saslmd5

import "fmt"

// Respond is the client's side of the second step: it answers a server's
// challenge for user and password with digest-uri protocol/host and the
// given cnonce, with authzid set to the user as ZooKeeper's Java client
// does. Janus serves only the server side; this is what tests and tools
// use to speak to it without a JVM.
func Respond(challenge []byte, user, password, protocol, host, cnonce string) ([]byte, error) {
	d, err := ParseDirectives(challenge)
	if err != nil {
		return nil, err
	}
	nonce, ok := d["nonce"]
	if !ok {
		return nil, fmt.Errorf("%w: challenge without a nonce", ErrAuth)
	}
	p := Params{User: user, Realm: d["realm"], Password: password, Nonce: nonce, CNonce: cnonce,
		DigestURI: protocol + "/" + host, Authzid: user, HasAuthzid: true}
	return []byte(fmt.Sprintf(`charset=utf-8,username="%s",realm="%s",nonce="%s",nc=00000001,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=auth,authzid="%s"`,
		quote(p.User), quote(p.Realm), quote(nonce), quote(cnonce), quote(p.DigestURI), p.Response("AUTHENTICATE"), quote(user))), nil
}
