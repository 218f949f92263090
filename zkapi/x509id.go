package zkapi

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"strings"
)

// x509ID is the identity ZooKeeper's X509AuthenticationProvider gives a
// client certificate: its subject as X500Principal.getName() prints it,
// RFC 2253 style. The RDNs come most specific first (the reverse of their
// order in the certificate); the attribute types RFC 2253 names are
// written by keyword, others as a dotted OID with the value's DER in hex;
// the JDK's escapes apply to string values.
func x509ID(cert *x509.Certificate) (string, error) {
	var rdns rdnSequence
	rest, err := asn1.Unmarshal(cert.RawSubject, &rdns)
	if err != nil {
		return "", fmt.Errorf("certificate subject: %w", err)
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("certificate subject: %d trailing bytes", len(rest))
	}
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		avas := make([]string, len(rdns[i]))
		for j, ava := range rdns[i] {
			avas[j] = rfc2253AVA(ava)
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ","), nil
}

// rdnSequence keeps each attribute value's DER, which a type without a
// keyword is written as.
type (
	rdnSequence []rdnSET
	rdnSET      []rawAVA // the SET suffix makes encoding/asn1 read a SET OF
	rawAVA      struct {
		Type  asn1.ObjectIdentifier
		Value asn1.RawValue
	}
)

// rfc2253Keywords are the attribute types X500Principal's RFC 2253 form
// writes by name.
var rfc2253Keywords = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
	"2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1": "UID",
}

// rfc2253AVA is the JDK's AVA.toRFC2253String.
func rfc2253AVA(ava rawAVA) string {
	oid := ava.Type.String()
	keyword, named := rfc2253Keywords[oid]
	value, isString := derString(ava.Value)
	if !named || !isString {
		if !named {
			keyword = oid
		}
		return keyword + "=#" + hex.EncodeToString(ava.Value.FullBytes)
	}
	const escapees = ",=+<>#;\"\\"
	var b strings.Builder
	for _, c := range value {
		switch {
		case strings.ContainsRune(escapees, c):
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(c)
		}
	}
	// Leading and trailing spaces (and carriage returns) are escaped.
	s := []rune(b.String())
	lead := 0
	for lead < len(s) && (s[lead] == ' ' || s[lead] == '\r') {
		lead++
	}
	trail := len(s) - 1
	for trail >= 0 && (s[trail] == ' ' || s[trail] == '\r') {
		trail--
	}
	var out strings.Builder
	out.WriteString(keyword + "=")
	for i, c := range s {
		if i < lead || i > trail {
			out.WriteByte('\\')
		}
		out.WriteRune(c)
	}
	return out.String()
}

// derString reads the string types the JDK writes as text (its
// isDerString): PrintableString, T61String, IA5String, GeneralString,
// BMPString and UTF8String. Their bytes are read as UTF-8 whatever the
// type, as the JDK 17 that ZooKeeper 3.8 runs on does (newer JDKs decode
// T61String and BMPString by their own charsets).
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagGeneralString, asn1.TagBMPString, asn1.TagUTF8String:
		return string(v.Bytes), true // an invalid byte ranges as U+FFFD, as Java decodes it
	}
	return "", false
}
