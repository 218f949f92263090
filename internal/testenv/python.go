package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// debianPython is the interpreter python3-kazoo installs for; another
// python3 earlier on PATH (a virtualenv, pyenv) would not see kazoo.
const debianPython = "/usr/bin/python3"

// Python3Kazoo returns the Python interpreter that can import kazoo.
func Python3Kazoo(t testing.TB) string {
	t.Helper()
	_, err := os.Stat(debianPython)
	Need(t, "python3", err == nil, fmt.Sprintf("%s: %v", debianPython, err))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, debianPython, "-c", "import kazoo").CombinedOutput()
	Need(t, "kazoo", err == nil, fmt.Sprintf("%s cannot import kazoo: %v: %s", debianPython, err, out))
	return debianPython
}

// RunPython runs script (Python source) under the kazoo-capable interpreter
// with args as sys.argv[1:], and returns its stdout. A non-zero exit fails
// the test with the script's stderr.
func RunPython(t testing.TB, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := PythonCommand(ctx, t, script, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testenv: python script failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// PythonCommand returns, unstarted, the command that runs script under the
// kazoo-capable interpreter with args; ctx ends it. It is for scripts a
// test runs alongside other work (RunPython blocks until the script ends).
func PythonCommand(ctx context.Context, t testing.TB, script string, args ...string) *exec.Cmd {
	t.Helper()
	return commandContext(ctx, Python3Kazoo(t), append([]string{"-c", script}, args...)...)
}
