package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CuratorClasspath returns a java classpath holding Curator 5 (framework,
// recipes, client), the ZooKeeper client it drives, and their runtime
// dependencies: Guava (which Debian ships with failureaccess inside) and
// SLF4J with the simple binding, so Curator's warnings reach stderr.
func CuratorClasspath(t testing.TB) string {
	t.Helper()
	return strings.Join(jars(t, []jarNeed{
		{"curator-recipes.jar", "curator"},
		{"curator-framework.jar", "curator"},
		{"curator-client.jar", "curator"},
		{"zookeeper.jar", "zookeeper"},
		{"zookeeper-jute.jar", "zookeeper"},
		{"guava.jar", "curator"},
		{"slf4j-api.jar", "slf4j"},
		{"slf4j-simple.jar", "slf4j"},
	}), ":")
}

// RunJava compiles the Java source file srcFile against CuratorClasspath and
// runs mainClass with args, returning its stdout. A non-zero exit fails the
// test with the program's stderr. Compiled classes are cached under the
// user's cache directory, keyed by the source and classpath, so each program
// is compiled once, not once per test.
func RunJava(t testing.TB, srcFile string, mainClass string, args ...string) (stdout string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := JavaCommand(ctx, t, srcFile, mainClass, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("testenv: java %s failed: %v\nstdout:\n%s\nstderr:\n%s", mainClass, err, out.String(), errOut.String())
	}
	return out.String()
}

// JavaCommand compiles srcFile as RunJava does and returns, unstarted, the
// command that runs mainClass with args; ctx ends it. It is for programs a
// test runs alongside other work (RunJava blocks until the program ends).
func JavaCommand(ctx context.Context, t testing.TB, srcFile string, mainClass string, args ...string) *exec.Cmd {
	t.Helper()
	javac, err := exec.LookPath("javac")
	Need(t, "javac", err == nil, fmt.Sprintf("javac not on PATH (a JDK is needed, not only a JRE): %v", err))
	java := javaPath(t)
	cp := CuratorClasspath(t)
	classes, err := compileJava(ctx, javac, srcFile, cp)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cmd := commandContext(ctx, java,
		"-Djava.net.preferIPv4Stack=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", classes+":"+cp, mainClass)
	cmd.Args = append(cmd.Args, args...)
	return cmd
}

// compileJava returns a directory holding the classes of srcFile, compiling
// them unless a previous run already did. Each compilation happens in a
// fresh directory that is renamed into place only when complete, so
// concurrent test binaries never see half-written classes.
func compileJava(ctx context.Context, javac, srcFile, classpath string) (string, error) {
	src, err := os.ReadFile(srcFile)
	if err != nil {
		return "", fmt.Errorf("read java source: %w", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(javac), []byte(classpath), []byte(filepath.Base(srcFile)), src} {
		h.Write(part)
		h.Write([]byte{0})
	}
	key := hex.EncodeToString(h.Sum(nil))[:24]

	cacheRoot, err := os.UserCacheDir()
	if err != nil {
		cacheRoot = os.TempDir()
	}
	parent := filepath.Join(cacheRoot, "janus-testenv", "java")
	final := filepath.Join(parent, key)
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("java class cache: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, key+".tmp-")
	if err != nil {
		return "", fmt.Errorf("java class cache: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed

	cmd := commandContext(ctx, javac, "-nowarn", "-d", tmp, "-cp", classpath, srcFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac %s: %w\n%s", srcFile, err, out)
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another test binary won the race; its classes are identical.
		if errors.Is(err, fs.ErrExist) || isDirNotEmpty(err) {
			return final, nil
		}
		return "", fmt.Errorf("java class cache: %w", err)
	}
	return final, nil
}

func isDirNotEmpty(err error) bool {
	var linkErr *os.LinkError
	return errors.As(err, &linkErr) && strings.Contains(linkErr.Err.Error(), "not empty")
}
