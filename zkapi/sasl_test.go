package zkapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/januskv/janus/internal/testenv"
)

// jaasClients are the client sections CuratorSASL logs in with, and
// Client, the section zkCli.sh (any ZooKeeper client by default) uses.
const jaasClients = `Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="kafka-secret";
};
KafkaClient {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="kafka-secret";
};
WrongPassword {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="not-the-password";
};
`

// TestCuratorSASLDifferential runs Curator 5 with JAAS DigestLoginModule
// logins, as Kafka does, against a ZooKeeper 3.8 and Janus given the same
// JAAS server file: a SASL user creates a sasl:kafka node, a client
// without SASL is refused it, a wrong password fails as on ZooKeeper.
func TestCuratorSASLDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper and JVMs")
	}
	jaas := writeJAAS(t)
	clients := filepath.Join(t.TempDir(), "client-jaas.conf")
	if err := os.WriteFile(clients, []byte(jaasClients), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{JVMFlags: zkAuthJVMFlags(jaas)})
	j := startJanus(t, authConfig(t, jaas))
	want := testenv.RunJava(t, "testdata/CuratorSASL.java", "CuratorSASL", ref.Addr, clients, "/sasl-curator")
	got := testenv.RunJava(t, "testdata/CuratorSASL.java", "CuratorSASL", j.Addr, clients, "/sasl-curator")
	if got != want {
		t.Errorf("Curator SASL differs:\nzookeeper:\n%s\njanus:\n%s", want, got)
	}
	t.Logf("janus:\n%s", got)
}

// TestZkCliSASLDifferential runs zkCli.sh with a JAAS Client section
// against ZooKeeper 3.8 and Janus: whoami, a node only sasl:kafka may use,
// and reading it back.
func TestZkCliSASLDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper and zkCli.sh")
	}
	jaas := writeJAAS(t)
	clients := filepath.Join(t.TempDir(), "client-jaas.conf")
	if err := os.WriteFile(clients, []byte(jaasClients), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{JVMFlags: zkAuthJVMFlags(jaas)})
	j := startJanus(t, authConfig(t, jaas))
	cmds := []string{"whoami", "create /zkcli-sasl v sasl:kafka:cdrwa", "getAcl /zkcli-sasl", "get /zkcli-sasl"}
	jvm := []string{"-Djava.security.auth.login.config=" + clients}
	// whoami's "sasl: kafka" is what shows the login; zkCli's event
	// thread prints its SaslAuthenticated line whenever it runs, before or
	// after the command's output or (if the JVM exits first) not at all,
	// so those lines are left out of the comparison.
	want := withoutSASLEvents(testenv.ZkCliJVM(t, ref.Addr, jvm, cmds...))
	got := withoutSASLEvents(testenv.ZkCliJVM(t, j.Addr, jvm, cmds...))
	if got != want {
		t.Errorf("zkCli.sh with SASL differs:\nzookeeper:\n%s\njanus:\n%s", want, got)
	}
	t.Logf("janus:\n%s", got)
}

// withoutSASLEvents drops zkCli.sh's SaslAuthenticated event lines.
func withoutSASLEvents(out string) string {
	var kept []string
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "WatchedEvent state:SaslAuthenticated type:None path:null") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}
