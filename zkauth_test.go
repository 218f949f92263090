package main

import (
	"crypto/sha1"
	"encoding/base64"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/januskv/janus/internal/testcert"
	"github.com/januskv/janus/internal/testenv"
)

const zkAuthJAAS = `Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_kafka="kafka-secret";
};
`

// TestZKAuthFlags: the ZooKeeper authentication flags, their zoo.cfg keys
// (ZooKeeper's system properties without "zookeeper.") and their refusals.
func TestZKAuthFlags(t *testing.T) {
	jaas := writeFile(t, "jaas.conf", zkAuthJAAS)
	sum := sha1.Sum([]byte("super:pw"))
	digest := "super:" + base64.StdEncoding.EncodeToString(sum[:])
	cfg, err := parseFlags([]string{"--zk-super-digest", digest, "--zk-x509-super-user", "CN=admin", "--zk-sasl-jaas-file", jaas,
		"--zk-sasl-super-user", "kafka", "--zk-enforce-auth-schemes", "sasl,x509"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ZKSuperDigest != digest || cfg.ZKX509SuperUser != "CN=admin" || cfg.ZKSASLUsers["kafka"] != "kafka-secret" ||
		cfg.ZKSASLSuperUser != "kafka" || !slices.Equal(cfg.ZKEnforceAuthSchemes, []string{"sasl", "x509"}) {
		t.Errorf("flags: %+v", cfg)
	}

	zooCfg := writeFile(t, "zoo.cfg", "tickTime=2000\nDigestAuthenticationProvider.superDigest="+digest+
		"\nX509AuthenticationProvider.superUser=CN=admin\nsuperUser=kafka\nsessionRequireClientSASLAuth=true\n"+
		"authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n")
	cfg, err = parseConfig([]string{"--zk-config", zooCfg}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ZKSuperDigest != digest || cfg.ZKX509SuperUser != "CN=admin" || cfg.ZKSASLSuperUser != "kafka" || !slices.Equal(cfg.ZKEnforceAuthSchemes, []string{"sasl"}) {
		t.Errorf("from zoo.cfg: %+v", cfg)
	}
	zooCfg = writeFile(t, "zoo2.cfg", "enforce.auth.enabled=true\nenforce.auth.schemes=digest, sasl\n")
	if cfg, err = parseConfig([]string{"--zk-config", zooCfg}, nil, io.Discard); err != nil || !slices.Equal(cfg.ZKEnforceAuthSchemes, []string{"digest", "sasl"}) {
		t.Errorf("enforce.auth from zoo.cfg: %v %v", cfg.ZKEnforceAuthSchemes, err)
	}
	yaml := writeFile(t, "janus.yaml", "zk-sasl-jaas-file: "+jaas+"\nzk-enforce-auth-schemes: [sasl]\n")
	if cfg, err = parseConfig([]string{"--config-file", yaml}, nil, io.Discard); err != nil || cfg.ZKSASLUsers["kafka"] == "" || !slices.Equal(cfg.ZKEnforceAuthSchemes, []string{"sasl"}) {
		t.Errorf("from YAML: %v %v %v", cfg.ZKSASLUsers, cfg.ZKEnforceAuthSchemes, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--zk-enforce-auth-schemes", "kerberos"}, `"kerberos" is not available`},
		{[]string{"--zk-super-digest", "no-colon"}, "super digest"},
		{[]string{"--zk-sasl-jaas-file", filepath.Join(t.TempDir(), "missing")}, "--zk-sasl-jaas-file"},
		{[]string{"--zk-sasl-jaas-file", writeFile(t, "client.conf", "Client { m required username=\"a\"; };")}, `no "Server" section`},
		{[]string{"--zk-sasl-jaas-file", writeFile(t, "broken.conf", "Server { m required user_a=\"x\" }")}, "--zk-sasl-jaas-file"},
		{[]string{"--zk-config", writeFile(t, "bad.cfg", "enforce.auth.enabled=true\n")}, "enforce.auth.schemes"},
	} {
		if _, err := parseConfig(tc.args, nil, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestZKX509WithZkCli: zkCli.sh over TLS with a client certificate is
// x509:<subject> on Janus: it sets an x509 ACL, another certificate is
// refused, and --zk-x509-super-user's certificate passes.
func TestZKX509WithZkCli(t *testing.T) {
	if testing.Short() {
		t.Skip("runs zkCli.sh")
	}
	ca := testcert.NewCA(t, "zk-clients")
	dir := t.TempDir()
	server := ca.Write(t, ca.Issue(t, "janus-server"), dir, "server")
	a := startInProcess(t, t.TempDir(), "--cert-file", server.Cert, "--key-file", server.Key, "--trusted-ca-file", server.CA,
		"--client-cert-auth", "--zk-secure-listen", "127.0.0.1:0", "--zk-x509-super-user", "CN=admin")
	as := func(cn string, cmds ...string) string {
		f := ca.Write(t, ca.Issue(t, cn), dir, cn)
		keyStore := filepath.Join(dir, cn+"-keystore.pem")
		testcert.WriteFile(t, keyStore, []byte(readFile(t, f.Cert)+readFile(t, f.Key)))
		return testenv.ZkCliJVM(t, a.ZKSecure, testenv.ZkCliTLSFlags(keyStore, f.CA), cmds...)
	}
	if got := as("alice", "whoami", "create /x509-cli from-alice x509:CN=alice:cdrwa", "get /x509-cli"); !strings.Contains(got, "x509: CN=alice") || !strings.Contains(got, "Created /x509-cli") || !strings.Contains(got, "from-alice") {
		t.Errorf("alice over TLS:\n%s", got)
	}
	if got := as("bob", "get /x509-cli"); !strings.Contains(got, "Insufficient permission") {
		t.Errorf("bob read alice's node:\n%s", got)
	}
	if got := as("admin", "get /x509-cli"); !strings.Contains(got, "from-alice") {
		t.Errorf("the x509 super user was refused:\n%s", got)
	}
}
