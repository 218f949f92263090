package zkapi_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/zkapi/jute"
)

// TestWatchReplyPrecedesItsNotification checks the order a client needs to
// see a watch fire: the reply to the read that sets a watch first, its
// notification after. ZooKeeper clients (kazoo, go-zookeeper, the Java
// client) register a watcher only when that reply arrives and drop a
// notification nobody registered for, so a notification that overtakes its
// reply is lost and whoever waits on the watch waits forever: kazoo's Lock
// and Semaphore hung that way while other sessions changed the watched
// children.
//
// One raw session sets a child watch on /p when it has none there, then
// changes /p's children itself, while writer sessions change them all the
// time. Its own change must fire the watch before its reply (the watch
// cannot be missed), and nothing may fire it before the read's reply. The
// workload is fixed (no seed); which write lands between the read and its
// reply is the scheduler's choice, so the test runs many rounds.
// ZKAPI_WATCHORDER_ROUNDS changes their number; ZKAPI_REFERENCE=1 runs it
// against a real ZooKeeper.
func TestWatchReplyPrecedesItsNotification(t *testing.T) {
	if testing.Short() {
		t.Skip("hammers one interleaving")
	}
	rounds := 400
	if n, err := strconv.Atoi(os.Getenv("ZKAPI_WATCHORDER_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	addr := target(t)
	setup, _ := connect(t, addr, 10*time.Second)
	if _, err := setup.Create("/p", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		c, _ := connect(t, addr, 10*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p, err := c.Create(fmt.Sprintf("/p/w%d-", w), nil, zk.FlagEphemeral|zk.FlagSequence, openACL)
				if err == nil {
					err = c.Delete(p, -1)
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d, round %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	r := dialRaw(t, addr)
	r.handshake(jute.ConnectRequest{TimeOut: 30000})
	childEvents := func(from int) int {
		n := 0
		for _, ev := range r.events[from:] {
			if ev.Type != jute.EventNodeChildrenChanged || ev.Path != "/p" {
				t.Fatalf("unexpected notification %+v", ev)
			}
			n++
		}
		return n
	}
	mine := ""
	for round := range rounds {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		before := len(r.events)
		var kids jute.GetChildren2Response
		if h := r.call(jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/p", Watch: true}, &kids); h.Err != jute.CodeOk {
			t.Fatalf("round %d: getChildren2: %v", round, h.Err)
		}
		if n := childEvents(before); n != 0 {
			t.Fatalf("round %d: the child watch on /p fired before the reply that set it (%d notifications first): a client drops such a notification and never wakes", round, n)
		}
		afterRead := len(r.events)
		// Change /p's children: create a node, or delete the one created.
		var h jute.ReplyHeader
		if mine == "" {
			var cr jute.CreateResponse
			h = r.call(jute.OpCreate, &jute.CreateRequest{Path: "/p/mine-", ACL: []jute.ACL{worldAll}, Flags: jute.ModeEphemeralSequential}, &cr)
			mine = cr.Path
		} else {
			h = r.call(jute.OpDelete, &jute.DeleteRequest{Path: mine, Version: -1}, nil)
			mine = ""
		}
		if h.Err != jute.CodeOk {
			t.Fatalf("round %d: write: %v", round, h.Err)
		}
		if n := childEvents(afterRead); n != 1 {
			t.Fatalf("round %d: %d child notifications between the read that set the watch and the reply to a write that changed the children, want 1", round, n)
		}
	}
	if len(errs) > 0 {
		t.Fatal(errors.Join(<-errs))
	}
}
