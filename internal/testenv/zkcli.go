package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// zkCliPath is where Debian's zookeeper package installs the CLI.
const zkCliPath = "/usr/share/zookeeper/bin/zkCli.sh"

// ZkCli runs Debian's zkCli.sh once per command against server (host:port)
// and returns the commands' output, in order. Each command is one line as a
// user would type it ("create /x 1"), split on whitespace, so data cannot
// contain spaces.
//
// zkCli.sh exits 1 when a command fails on the server side ("Node does not
// exist: /x"); that output is returned, since comparing it is often the
// point. Failing to run at all, an unknown command, or hanging fails the test.
func ZkCli(t testing.TB, server string, cmds ...string) string {
	t.Helper()
	return ZkCliJVM(t, server, nil, cmds...)
}

// ZkCliJVM is ZkCli with extra JVM flags for the client, such as
// ZooKeeper's client TLS properties (-Dzookeeper.client.secure=true ...).
func ZkCliJVM(t testing.TB, server string, jvmFlags []string, cmds ...string) string {
	t.Helper()
	_, err := os.Stat(zkCliPath)
	Need(t, "zkCli.sh", err == nil, fmt.Sprintf("%s: %v", zkCliPath, err))
	javaPath(t)

	var all strings.Builder
	for _, line := range cmds {
		args := append([]string{"-server", server}, strings.Fields(line)...)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := commandContext(ctx, zkCliPath, args...)
		// The CLI runs for well under a second: skip the optimizing JIT.
		cmd.Env = append(os.Environ(), "CLIENT_JVMFLAGS=-XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true "+strings.Join(jvmFlags, " "))
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out // "Created /x" goes to stderr, errors to stdout
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		var exitErr *exec.ExitError
		if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode() == 1 && !timedOut) {
			t.Fatalf("testenv: zkCli.sh %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		all.WriteString(cleanZkCliOutput(out.String()))
	}
	return all.String()
}

// cleanZkCliOutput drops the connection chatter zkCli.sh prints around every
// command, keeping what the command itself printed.
func cleanZkCliOutput(s string) string {
	var kept []string
	for line := range strings.SplitSeq(s, "\n") {
		switch {
		case strings.HasPrefix(line, "SLF4J:"),
			strings.HasPrefix(line, "Connecting to "),
			line == "WATCHER::",
			strings.HasPrefix(line, "WatchedEvent state:SyncConnected type:None path:null"),
			strings.HasPrefix(line, "WatchedEvent state:Closed type:None path:null"):
			continue
		}
		if len(kept) == 0 && strings.TrimSpace(line) == "" {
			continue
		}
		kept = append(kept, line)
	}
	out := strings.TrimRight(strings.Join(kept, "\n"), "\n")
	if out == "" {
		return ""
	}
	return out + "\n"
}

// ZkCliTLSFlags are the JVM flags that make zkCli.sh connect over TLS, as
// ZooKeeper documents them: the Netty client socket, client.secure, and
// PEM key and trust stores (keyStore holds the client certificate and its
// key in one file; trustStore the CA).
//
// Debian's zookeeper.jar names its dependencies in its manifest but leaves
// out netty-resolver and netty-codec, which only the Netty socket needs, so
// the flags also restate the class path with them (java uses the last -cp).
func ZkCliTLSFlags(keyStore, trustStore string) []string {
	return []string{
		"-cp", "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-codec.jar",
		"-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
		"-Dzookeeper.client.secure=true",
		"-Dzookeeper.ssl.keyStore.location=" + keyStore, "-Dzookeeper.ssl.keyStore.type=PEM",
		"-Dzookeeper.ssl.trustStore.location=" + trustStore, "-Dzookeeper.ssl.trustStore.type=PEM",
	}
}
