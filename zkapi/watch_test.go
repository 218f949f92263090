package zkapi_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

func TestOneShotWatches(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)
	other, _ := connect(t, j.Addr, 10*time.Second)

	// exists on a missing node fires NodeCreated.
	ok, _, existsCh, err := c.ExistsW("/w")
	if err != nil || ok {
		t.Fatalf("existsW = %v, %v", ok, err)
	}
	_, _, rootCh, err := c.ChildrenW("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create("/w", []byte("a"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, existsCh); ev.Type != zk.EventNodeCreated || ev.Path != "/w" {
		t.Errorf("exists watch: %+v", ev)
	}
	if ev := waitEvent(t, rootCh); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/" {
		t.Errorf("child watch on /: %+v", ev)
	}

	// getData fires NodeDataChanged once.
	_, _, dataCh, err := c.GetW("/w")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := other.Set("/w", []byte("b"), -1); err != nil {
			t.Fatal(err)
		}
	}
	if ev := waitEvent(t, dataCh); ev.Type != zk.EventNodeDataChanged {
		t.Errorf("data watch: %+v", ev)
	}
	select {
	case ev, ok := <-dataCh:
		if ok {
			t.Errorf("one-shot watch fired twice: %+v", ev)
		}
	default:
	}

	// Deleting a node fires NodeDeleted on its data and child watches.
	_, _, dataCh, _ = c.GetW("/w")
	_, _, childCh, _ := c.ChildrenW("/w")
	if err := other.Delete("/w", -1); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, dataCh); ev.Type != zk.EventNodeDeleted {
		t.Errorf("data watch on delete: %+v", ev)
	}
	if ev := waitEvent(t, childCh); ev.Type != zk.EventNodeDeleted {
		t.Errorf("child watch on delete: %+v", ev)
	}
}

// A notification must reach the client before the reply to any later
// request that shows the change: go-zookeeper delivers watch events and
// replies in arrival order on separate paths, so the test writes from the
// watching session itself and checks the event is already there.
func TestNotificationPrecedesReply(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)
	if _, err := c.Create("/o", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		_, _, ch, err := c.GetW("/o")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Set("/o", []byte{byte(i)}, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-ch:
			if ev.Type != zk.EventNodeDataChanged {
				t.Fatalf("event %+v", ev)
			}
		default:
			t.Fatalf("round %d: reply to setData arrived before the watch event", i)
		}
	}
}

func TestSessionCloseDeletesEphemeralsAndFiresWatches(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	owner, _ := connect(t, j.Addr, 10*time.Second)
	watcher, _ := connect(t, j.Addr, 10*time.Second)
	if _, err := owner.Create("/eph", nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := watcher.ExistsW("/eph")
	if err != nil {
		t.Fatal(err)
	}
	owner.Close()
	if ev := waitEvent(t, ch); ev.Type != zk.EventNodeDeleted || ev.Path != "/eph" {
		t.Errorf("event %+v", ev)
	}
}

func TestSessionExpiryDeletesEphemerals(t *testing.T) {
	j := startJanus(t, zkapi.Config{TickTime: 100 * time.Millisecond})
	watcher, _ := connect(t, j.Addr, 2*time.Second)
	owner := dialRaw(t, j.Addr)
	resp := owner.handshake(jute.ConnectRequest{TimeOut: 200})
	if resp.TimeOut != 200 || resp.SessionID == 0 {
		t.Fatalf("connect response %+v", resp)
	}
	var cr jute.CreateResponse
	if h := owner.call(jute.OpCreate, &jute.CreateRequest{Path: "/eph", ACL: []jute.ACL{worldAll}, Flags: jute.ModeEphemeral}, &cr); h.Err != jute.CodeOk {
		t.Fatalf("create: %v", h.Err)
	}
	_, _, ch, err := watcher.ExistsW("/eph")
	if err != nil {
		t.Fatal(err)
	}
	// Drop the connection without closing the session: it must expire.
	owner.nc.Close()
	if ev := waitEvent(t, ch); ev.Type != zk.EventNodeDeleted {
		t.Errorf("event %+v", ev)
	}
	// Re-attaching to the expired session is refused with timeout 0.
	again := dialRaw(t, j.Addr)
	refused := again.handshake(jute.ConnectRequest{TimeOut: 200, SessionID: resp.SessionID, Passwd: resp.Passwd})
	if refused.TimeOut != 0 || refused.SessionID != 0 {
		t.Errorf("re-attach to expired session: %+v", refused)
	}
}

func TestReattach(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	first := dialRaw(t, j.Addr)
	resp := first.handshake(jute.ConnectRequest{TimeOut: 10000})
	if resp.HasReadOnly {
		t.Errorf("read-only byte answered to a client that sent none")
	}
	wrong := dialRaw(t, j.Addr)
	bad := append([]byte(nil), resp.Passwd...)
	bad[0] ^= 1
	if r := wrong.handshakeRO(jute.ConnectRequest{TimeOut: 10000, SessionID: resp.SessionID, Passwd: bad, HasReadOnly: true}); r.TimeOut != 0 || !r.HasReadOnly {
		t.Errorf("wrong password: %+v", r)
	}
	second := dialRaw(t, j.Addr)
	if r := second.handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: resp.SessionID, Passwd: resp.Passwd}); r.SessionID != resp.SessionID || r.TimeOut != 10000 {
		t.Errorf("re-attach: %+v", r)
	}
	// The session's old connection is closed.
	first.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := jute.ReadFrame(first.br, 1<<20); err == nil {
		t.Error("old connection still open after re-attach")
	}
	var st jute.ExistsResponse
	if h := second.call(jute.OpExists, &jute.ExistsRequest{Path: "/zookeeper"}, &st); h.Err != jute.CodeOk {
		t.Errorf("exists on re-attached session: %v", h.Err)
	}
}

func TestPersistentWatches(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	w, _ := connect(t, j.Addr, 10*time.Second)
	c := dialRaw(t, j.Addr)
	c.handshake(jute.ConnectRequest{TimeOut: 10000})
	if _, err := w.Create("/r", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	if h := c.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/r", Mode: jute.AddWatchPersistentRecursive}, nil); h.Err != jute.CodeOk {
		t.Fatalf("addWatch recursive: %v", h.Err)
	}
	if h := c.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/p", Mode: jute.AddWatchPersistent}, nil); h.Err != jute.CodeOk {
		t.Fatalf("addWatch persistent: %v", h.Err)
	}
	steps := []func() error{
		func() error { _, err := w.Create("/r/a", nil, 0, openACL); return err },
		func() error { _, err := w.Create("/r/a/b", nil, 0, openACL); return err },
		func() error { _, err := w.Set("/r/a/b", []byte("x"), -1); return err },
		func() error { return w.Delete("/r/a/b", -1) },
		func() error { _, err := w.Create("/p", nil, 0, openACL); return err },
		func() error { _, err := w.Create("/p/kid", nil, 0, openACL); return err },
		func() error { _, err := w.Set("/p", []byte("x"), -1); return err },
		func() error { _, err := w.Set("/p", []byte("y"), -1); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	// A sync round trip flushes every notification queued before it.
	c.call(jute.OpSync, &jute.SyncRequest{Path: "/"}, &jute.SyncResponse{})
	want := []jute.WatcherEvent{
		{Type: jute.EventNodeCreated, Path: "/r/a"},
		{Type: jute.EventNodeCreated, Path: "/r/a/b"},
		{Type: jute.EventNodeDataChanged, Path: "/r/a/b"},
		{Type: jute.EventNodeDeleted, Path: "/r/a/b"},
		{Type: jute.EventNodeCreated, Path: "/p"},
		{Type: jute.EventNodeChildrenChanged, Path: "/p"},
		{Type: jute.EventNodeDataChanged, Path: "/p"},
		{Type: jute.EventNodeDataChanged, Path: "/p"},
	}
	got := c.events
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Type != want[i].Type || got[i].Path != want[i].Path || got[i].State != jute.StateSyncConnected {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// removeWatches sends no event; a second removal finds nothing.
	c.events = nil
	if h := c.call(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: "/p", Type: jute.WatcherAny}, nil); h.Err != jute.CodeOk {
		t.Errorf("removeWatches: %v", h.Err)
	}
	if h := c.call(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: "/p", Type: jute.WatcherAny}, nil); h.Err != jute.CodeNoWatcher {
		t.Errorf("checkWatches after removal: %v", h.Err)
	}
	if _, err := w.Set("/p", []byte("z"), -1); err != nil {
		t.Fatal(err)
	}
	c.call(jute.OpSync, &jute.SyncRequest{Path: "/"}, &jute.SyncResponse{})
	if len(c.events) != 0 {
		t.Errorf("events after removeWatches: %+v", c.events)
	}
}

func TestSetWatchesFiresChangedAndArmsTheRest(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	w, _ := connect(t, j.Addr, 10*time.Second)
	for _, p := range []string{"/s", "/s/same", "/s/changed"} {
		if _, err := w.Create(p, nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	_, st, _ := w.Exists("/s/changed")
	rel := st.Mzxid
	if _, err := w.Set("/s/changed", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete("/s/same", -1); err == nil {
		if _, err := w.Create("/s/same", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, j.Addr)
	c.handshake(jute.ConnectRequest{TimeOut: 10000, LastZxidSeen: rel})
	h := c.callXid(jute.XidSetWatches, jute.OpSetWatches, &jute.SetWatches{
		RelativeZxid: rel,
		DataWatches:  []string{"/s/changed", "/gone"},
		ExistWatches: []string{"/s", "/nope"},
		ChildWatches: []string{"/s"},
	}, nil)
	if h.Err != jute.CodeOk || h.Xid != jute.XidSetWatches {
		t.Fatalf("setWatches reply %+v", h)
	}
	want := map[jute.WatcherEvent]bool{
		{Type: jute.EventNodeDataChanged, State: jute.StateSyncConnected, Path: "/s/changed"}: true,
		{Type: jute.EventNodeDeleted, State: jute.StateSyncConnected, Path: "/gone"}:          true,
		{Type: jute.EventNodeCreated, State: jute.StateSyncConnected, Path: "/s"}:             true,
		{Type: jute.EventNodeChildrenChanged, State: jute.StateSyncConnected, Path: "/s"}:     true,
	}
	if len(c.events) != len(want) {
		t.Fatalf("events %+v", c.events)
	}
	for _, ev := range c.events {
		if !want[ev] {
			t.Errorf("unexpected event %+v", ev)
		}
	}
	// The exists watch on /nope was armed.
	c.events = nil
	if _, err := w.Create("/nope", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	c.call(jute.OpSync, &jute.SyncRequest{Path: "/"}, &jute.SyncResponse{})
	if len(c.events) != 1 || c.events[0].Type != jute.EventNodeCreated || c.events[0].Path != "/nope" {
		t.Errorf("armed exists watch: %+v", c.events)
	}
}

// TestWatchEventsNeedRead checks that an event reaches only watchers that
// may READ the node (the parent, for NodeChildrenChanged), and that a
// watcher without READ loses its one-shot watch all the same.
func TestWatchEventsNeedRead(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	alice, _ := connect(t, j.Addr, 10*time.Second)
	anon, _ := connect(t, j.Addr, 10*time.Second)
	if err := alice.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	private := zk.DigestACL(zk.PermAll, "alice", "pw")
	if _, err := alice.Create("/priv", nil, 0, private); err != nil {
		t.Fatal(err)
	}
	// Both watch the private node's creation-to-be and its children.
	_, _, anonExists, err := anon.ExistsW("/priv/kid")
	if err != nil {
		t.Fatal(err)
	}
	_, _, aliceExists, err := alice.ExistsW("/priv/kid")
	if err != nil {
		t.Fatal(err)
	}
	_, _, aliceKids, err := alice.ChildrenW("/priv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Create("/priv/kid", nil, 0, private); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, aliceExists); ev.Type != zk.EventNodeCreated {
		t.Errorf("alice's exists watch: %+v", ev)
	}
	if ev := waitEvent(t, aliceKids); ev.Type != zk.EventNodeChildrenChanged {
		t.Errorf("alice's child watch: %+v", ev)
	}
	// A round trip on anon's connection: any event for it would come first.
	if _, _, err := anon.Exists("/"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-anonExists:
		t.Errorf("anonymous watcher told of a node it may not read: %+v", ev)
	default:
	}
	// The watch was consumed: once anon may read, a change still tells it
	// nothing, until it watches again.
	if err := anon.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Set("/priv/kid", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := anon.Exists("/"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-anonExists:
		t.Errorf("consumed watch fired again: %+v", ev)
	default:
	}
	_, _, again, err := anon.GetW("/priv/kid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Set("/priv/kid", []byte("y"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, again); ev.Type != zk.EventNodeDataChanged {
		t.Errorf("new watch after auth: %+v", ev)
	}
}
