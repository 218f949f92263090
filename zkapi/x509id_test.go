package zkapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/januskv/janus/internal/testenv"
)

// subjectCert makes a self-signed certificate whose subject is rdns as
// given, so that string types and multi-valued RDNs are as chosen.
func subjectCert(t *testing.T, rdns pkix.RDNSequence) *x509.Certificate {
	t.Helper()
	raw, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), RawSubject: raw,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
)

func ava(oid asn1.ObjectIdentifier, v any) pkix.AttributeTypeAndValue {
	return pkix.AttributeTypeAndValue{Type: oid, Value: v}
}

func tagged(tag int, b []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: b}
}

func bmp(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u>>8), byte(u))
	}
	return b
}

// x509IDCases are subjects with what X500Principal.getName() prints for
// them; TestX509IDMatchesJava checks the expectations against a JVM.
var x509IDCases = []struct {
	rdns pkix.RDNSequence
	want string
}{
	{pkix.RDNSequence{{ava(oidCN, "alice")}}, "CN=alice"},
	{pkix.RDNSequence{{ava(oidC, "US")}, {ava(oidO, "Janus")}, {ava(oidOU, "ops")}, {ava(oidCN, "alice")}}, "CN=alice,OU=ops,O=Janus,C=US"},
	{pkix.RDNSequence{{ava(oidCN, ` a,b+c=d<e>#f;g"h\i `)}}, `CN=\ a\,b\+c\=d\<e\>\#f\;g\"h\\i\ `},
	{pkix.RDNSequence{{ava(oidCN, "Ünïcødé ☃")}}, "CN=Ünïcødé ☃"},
	{pkix.RDNSequence{{ava(oidCN, "x"), ava(oidUID, "u1")}, {ava(oidDC, "example")}}, "DC=example,CN=x+UID=u1"},
	{pkix.RDNSequence{{ava(oidSerial, "123")}, {ava(oidCN, "s")}}, "CN=s,2.5.4.5=#1303313233"},
	{pkix.RDNSequence{{ava(oidEmail, tagged(asn1.TagIA5String, []byte("a@b.c")))}}, "1.2.840.113549.1.9.1=#16056140622e63"},
	{pkix.RDNSequence{{ava(oidCN, tagged(asn1.TagBMPString, bmp("bmp ☃")))}}, `CN=\00b\00m\00p\00 &` + "\x03"},
	{pkix.RDNSequence{{ava(oidCN, tagged(asn1.TagT61String, []byte{'t', 0xe9}))}}, "CN=t\uFFFD"},
	{pkix.RDNSequence{{ava(oidCN, "nul\x00in")}}, `CN=nul\00in`},
}

func TestX509ID(t *testing.T) {
	for _, tc := range x509IDCases {
		got, err := x509ID(subjectCert(t, tc.rdns))
		if err != nil || got != tc.want {
			t.Errorf("x509ID = %q, %v; want %q", got, err, tc.want)
		}
	}
}

// TestX509IDMatchesJava checks that the expectations of TestX509ID are
// what the JDK (as ZooKeeper runs on it) prints.
func TestX509IDMatchesJava(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a JVM")
	}
	dir := t.TempDir()
	var files, want []string
	for i, tc := range x509IDCases {
		c := subjectCert(t, tc.rdns)
		f := filepath.Join(dir, "c"+string(rune('a'+i))+".pem")
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		want = append(want, tc.want)
	}
	got := strings.Split(strings.TrimSuffix(testenv.RunJava(t, "testdata/X500Names.java", "X500Names", files...), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("java printed %d names for %d certificates: %q", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("certificate %d: java %q, expected %q", i, got[i], want[i])
		}
	}
}
