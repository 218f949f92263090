package zkapi_test

import (
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
// see a watch fire: the reply to the request that sets a watch first, its
// notification after. ZooKeeper clients (kazoo, go-zookeeper, the Java
// client) register a watcher only when that reply arrives and drop a
// notification nobody registered for, so a notification that overtakes its
// reply is lost and whoever waits on the watch waits forever: kazoo's Lock
// and Semaphore hung that way while other sessions changed the watched
// children.
//
// For each request that arms a watch, one raw session sets a watch on /p
// when it has none there, then changes /p itself, while writer sessions
// change /p's data and children all the time. Its own change must have
// fired the watch by its reply (the watch cannot be missed), and nothing
// may fire it before the reply that set it. The workload is fixed (no
// seed); which write lands between the read and its reply is the
// scheduler's choice, so each case runs many rounds.
// ZKAPI_WATCHORDER_ROUNDS changes their number; ZKAPI_REFERENCE=1 runs the
// test against a real ZooKeeper.
func TestWatchReplyPrecedesItsNotification(t *testing.T) {
	if testing.Short() {
		t.Skip("hammers one interleaving")
	}
	rounds := 300
	if n, err := strconv.Atoi(os.Getenv("ZKAPI_WATCHORDER_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	addr := target(t)
	setup, _ := connect(t, addr, 10*time.Second)
	if _, err := setup.Create("/p", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}

	// Writers: two change /p's children, two its data.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	changes := []func(c *zk.Conn) error{
		func(c *zk.Conn) error {
			p, err := c.Create("/p/w-", nil, zk.FlagEphemeral|zk.FlagSequence, openACL)
			if err == nil {
				err = c.Delete(p, -1)
			}
			return err
		},
		func(c *zk.Conn) error {
			_, err := c.Set("/p", []byte("w"), -1)
			return err
		},
	}
	changes = append(changes, changes...)
	errs := make(chan error, len(changes))
	for w, change := range changes {
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
				if err := change(c); err != nil {
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

	for _, tc := range []struct {
		name string
		arm  func(r *rawClient) jute.ReplyHeader
		// children: the watch fires for a change of /p's children, else
		// of its data.
		children, persistent bool
	}{
		{"getChildren", func(r *rawClient) jute.ReplyHeader {
			return r.call(jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/p", Watch: true}, &jute.GetChildrenResponse{})
		}, true, false},
		{"getChildren2", func(r *rawClient) jute.ReplyHeader {
			return r.call(jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/p", Watch: true}, &jute.GetChildren2Response{})
		}, true, false},
		{"getData", func(r *rawClient) jute.ReplyHeader {
			return r.call(jute.OpGetData, &jute.GetDataRequest{Path: "/p", Watch: true}, &jute.GetDataResponse{})
		}, false, false},
		{"exists", func(r *rawClient) jute.ReplyHeader {
			return r.call(jute.OpExists, &jute.ExistsRequest{Path: "/p", Watch: true}, &jute.ExistsResponse{})
		}, false, false},
		{"addWatch", func(r *rawClient) jute.ReplyHeader {
			return r.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/p", Mode: jute.AddWatchPersistent}, nil)
		}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			r.handshake(jute.ConnectRequest{TimeOut: 30000})
			mine := ""
			change := func() jute.ReplyHeader {
				if !tc.children {
					return r.call(jute.OpSetData, &jute.SetDataRequest{Path: "/p", Data: []byte("mine"), Version: -1}, &jute.SetDataResponse{})
				}
				if mine == "" {
					var cr jute.CreateResponse
					h := r.call(jute.OpCreate, &jute.CreateRequest{Path: "/p/mine-", ACL: []jute.ACL{worldAll}, Flags: jute.ModeEphemeralSequential}, &cr)
					mine = cr.Path
					return h
				}
				h := r.call(jute.OpDelete, &jute.DeleteRequest{Path: mine, Version: -1}, nil)
				mine = ""
				return h
			}
			for round := range rounds {
				select {
				case err := <-errs:
					t.Fatal(err)
				default:
				}
				before := len(r.events)
				if h := tc.arm(r); h.Err != jute.CodeOk {
					t.Fatalf("round %d: %v", round, h.Err)
				}
				if fired := r.events[before:]; len(fired) != 0 {
					t.Fatalf("round %d: the watch on /p fired before the reply that set it (%+v): a client drops such a notification and never wakes", round, fired)
				}
				armed := len(r.events)
				if h := change(); h.Err != jute.CodeOk {
					t.Fatalf("round %d: change: %v", round, h.Err)
				}
				fired := r.events[armed:]
				if len(fired) == 0 || !tc.persistent && len(fired) != 1 {
					t.Fatalf("round %d: notifications between the reply that set the watch and the reply to a change it watches: %+v", round, fired)
				}
				for _, ev := range fired {
					if ev.Path != "/p" {
						t.Fatalf("round %d: notification %+v", round, ev)
					}
				}
				if tc.persistent {
					if h := r.call(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: "/p", Type: jute.WatcherAny}, nil); h.Err != jute.CodeOk {
						t.Fatalf("round %d: removeWatches: %v", round, h.Err)
					}
				}
			}
		})
	}
}
