package zkapi_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
)

// target returns the address the client tests run against: Janus, or
// with ZKAPI_REFERENCE=1 a real ZooKeeper, to check the tests themselves.
func target(t *testing.T) string {
	if os.Getenv("ZKAPI_REFERENCE") != "" {
		return testenv.StartZooKeeper(t, testenv.ZKOptions{}).Addr
	}
	return startJanus(t, zkapi.Config{}).Addr
}

func TestKazooRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kazoo")
	}
	script, err := os.ReadFile("testdata/kazoo_recipes.py")
	if err != nil {
		t.Fatal(err)
	}
	out := testenv.RunPython(t, string(script), target(t))
	for _, recipe := range []string{"Lock", "Election", "Barrier", "DoubleBarrier", "Counter", "Queue",
		"LockingQueue", "Party", "Semaphore", "DataWatch", "ChildrenWatch"} {
		if !strings.Contains(out, "ok "+recipe+"\n") {
			t.Errorf("kazoo %s did not pass; output:\n%s", recipe, out)
		}
	}
}

func TestCuratorRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Curator")
	}
	out := testenv.RunJava(t, "testdata/CuratorRecipes.java", "CuratorRecipes", target(t))
	for _, recipe := range []string{"InterProcessMutex", "container parents", "LeaderLatch", "CuratorCache", "PersistentWatcher", "digest"} {
		if !strings.Contains(out, "ok "+recipe+"\n") {
			t.Errorf("Curator %s did not pass; output:\n%s", recipe, out)
		}
	}
}

// TestZkCli runs the same zkCli.sh commands against a real ZooKeeper and
// against Janus and compares what the CLI prints.
func TestZkCli(t *testing.T) {
	if testing.Short() {
		t.Skip("runs zkCli.sh")
	}
	// Each command is a zkCli process of its own, which exits without
	// closing its session: the ephemeral would live until its session
	// times out (30 s), so whether later commands saw it would depend on
	// how fast the JVMs start. It is deleted explicitly, two commands
	// after its creation.
	cmds := []string{
		"create /cli hello",
		"get /cli",
		"set /cli world",
		"get /cli",
		"create -e /cli/eph x",
		"ls /cli",
		"create /cli/eph/child x",
		"delete /cli/eph",
		"create -s /cli/seq- x",
		"delete /cli",
		"get /missing",
		"setAcl /cli auth:bob:secret:cdrwa",
		"setAcl /cli digest:bob:abc:r",
		"getAcl /cli",
		"set /cli x",
		"create -c /cont x",
		"create -t 1000 /ttl x",
		"stat /cli",
		"ls -R /cli",
		"getAllChildrenNumber /cli",
		"deleteall /missing",
		"delete /zookeeper",
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	want := testenv.ZkCli(t, ref.Addr, cmds...)
	got := testenv.ZkCli(t, startJanus(t, zkapi.Config{}).Addr, cmds...)
	wantLines, gotLines := strings.Split(want, "\n"), strings.Split(got, "\n")
	if len(wantLines) != len(gotLines) {
		t.Fatalf("zkCli output:\n%s\nZooKeeper printed:\n%s", got, want)
	}
	for i := range wantLines {
		// stat prints zxids and times, which differ by design.
		if zxidOrTime.MatchString(wantLines[i]) && zxidOrTime.MatchString(gotLines[i]) {
			continue
		}
		if wantLines[i] != gotLines[i] {
			t.Errorf("line %d: janus %q, zookeeper %q", i, gotLines[i], wantLines[i])
		}
	}
}

var zxidOrTime = regexp.MustCompile(`^(cZxid|mZxid|pZxid|ctime|mtime|ephemeralOwner) = `)

// TestCuratorCacheMissingRoot starts a CuratorCache on a missing root
// against a real ZooKeeper and against Janus, and compares what the cache
// reports as the root and a child below it come and go.
func TestCuratorCacheMissingRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Curator")
	}
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	want := testenv.RunJava(t, "testdata/CuratorCacheMissingRoot.java", "CuratorCacheMissingRoot", ref.Addr, "/cmr")
	got := testenv.RunJava(t, "testdata/CuratorCacheMissingRoot.java", "CuratorCacheMissingRoot", startJanus(t, zkapi.Config{}).Addr, "/cmr")
	// Only what the program printed up to "done": the client library may
	// log on stderr after it.
	want, _, _ = strings.Cut(want, "done\n")
	got, _, _ = strings.Cut(got, "done\n")
	if got != want || !strings.Contains(got, "delete /cmr\n") {
		t.Errorf("CuratorCache on Janus reported:\n%s\nZooKeeper's reported:\n%s", got, want)
	}
}
