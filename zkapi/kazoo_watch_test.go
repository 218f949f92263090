package zkapi_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/januskv/janus/internal/testenv"
)

// TestKazooWatchOrder runs testdata/kazoo_watch_order.py: kazoo must lose
// no watch notification while another session changes the watched nodes
// (the cause of kazoo Semaphore hangs in TestKazooRecipes). Which write
// lands in the window is the scheduler's choice, so it runs many rounds;
// ZKAPI_KAZOO_ORDER_ROUNDS changes their number.
func TestKazooWatchOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kazoo")
	}
	rounds := 500
	if n, err := strconv.Atoi(os.Getenv("ZKAPI_KAZOO_ORDER_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	script, err := os.ReadFile("testdata/kazoo_watch_order.py")
	if err != nil {
		t.Fatal(err)
	}
	out := testenv.RunPython(t, string(script), target(t), strconv.Itoa(rounds))
	if !strings.Contains(out, "ok watch order\n") {
		t.Errorf("kazoo watch order; output:\n%s", out)
	}
}
