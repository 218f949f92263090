package zkapi_test

import (
	"os"
	"strings"
	"testing"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
)

func TestKazooRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kazoo")
	}
	script, err := os.ReadFile("testdata/kazoo_recipes.py")
	if err != nil {
		t.Fatal(err)
	}
	j := startJanus(t, zkapi.Config{})
	out := testenv.RunPython(t, string(script), j.Addr)
	for _, recipe := range []string{"Lock", "Election", "Barrier", "DoubleBarrier", "Counter", "Queue",
		"LockingQueue", "Party", "Semaphore", "DataWatch", "ChildrenWatch"} {
		if !strings.Contains(out, "ok "+recipe+"\n") {
			t.Errorf("kazoo %s did not pass; output:\n%s", recipe, out)
		}
	}
}
