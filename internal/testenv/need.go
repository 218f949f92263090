package testenv

import (
	"os"
	"testing"
)

// debianPackage names what to install for each dependency Need knows.
func debianPackage(what string) string {
	switch what {
	case "zookeeper", "zkCli.sh":
		return "zookeeper"
	case "java":
		return "default-jre-headless"
	case "javac":
		return "default-jdk-headless"
	case "python3":
		return "python3"
	case "kazoo":
		return "python3-kazoo"
	case "curator":
		return "libcurator-recipes-java libcurator-framework-java"
	case "slf4j":
		return "libslf4j-java"
	case "log4j":
		return "liblog4j1.2-java"
	case "go":
		return "golang-go (or any Go toolchain on PATH)"
	case "tmpfs":
		return "none: mounting a tmpfs needs root (CAP_SYS_ADMIN)"
	case "chromium":
		return "chromium"
	case "etcd tools":
		return "none: etcd and etcdctl are built from go.mod's tool block (make tools)"
	}
	return "the one that provides " + what
}

// Need stops the test when a dependency is missing: ok reports whether what is
// available and why says what is wrong if not. Outside CI the test is
// skipped, so a developer without the reference servers can still run the
// rest; in CI (CI=true) a missing reference is a broken environment, and the
// test fails rather than silently passing.
func Need(t testing.TB, what string, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	install := debianPackage(what)
	if os.Getenv("CI") == "true" {
		t.Fatalf("testenv: %s is required in CI but unavailable: %s (Debian package: %s)", what, why, install)
		return
	}
	t.Skipf("testenv: skipping, %s unavailable: %s (install Debian package: %s)", what, why, install)
}
