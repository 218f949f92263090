package console_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/go-zookeeper/zk"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/januskv/janus/internal/testenv"
)

// screenshotsEnv names the environment variable that makes the browser
// tests save a screenshot of each view into docs/console, for the README.
// Normal runs leave the committed pictures alone.
const screenshotsEnv = "JANUS_CONSOLE_SCREENSHOTS"

// browserTimeout bounds one browser test's page work: a page that never
// shows what the test waits for fails it rather than hanging the run.
const browserTimeout = 3 * time.Minute

// chromium finds Debian's Chromium; without it the browser tests skip,
// and fail under CI=true.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Need(t, "chromium", false, "no chromium, chromium-browser or google-chrome on PATH")
	return ""
}

// browser starts a headless Chromium for the test and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests may run as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelT := context.WithTimeout(ctx, browserTimeout)
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// A script error the page did not handle fails the test, whether or
	// not the test looked at what it broke.
	var mu sync.Mutex
	var uncaught []string
	go func() {
		for ev, err := range chromedp.Events(ctx, runtime.ExceptionThrown) {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			mu.Lock()
			uncaught = append(uncaught, msg)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range uncaught {
			t.Errorf("uncaught script error in the page: %s", msg)
		}
	})
	return ctx
}

// run runs browser steps, failing the test with what was being done.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// textOf waits for the CSS selector sel and returns its text.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// waitText waits until sel's text contains want (the page draws after
// its fetches answer; the test waits for the drawing, not for a time).
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		var now string
		now, _ = chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || "(absent)"`, sel)))
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("wait for %q in %s: %v; it reads %q; the page reads:\n%s", want, sel, err, now, page)
	}
}

// screenshot saves the page as docs/console/name.png when asked to.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv(screenshotsEnv) == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join("..", "docs", "console", name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// TestBrowserTree opens a deep link to a node written through etcd and
// checks both views, then a ZooKeeper node with its ACL, an implicit
// parent, and the list of keys only etcd sees.
func TestBrowserTree(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	put, err := j.etcd.Put(t.Context(), "/app/config/db", `{"host":"db1","port":5432}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Put(t.Context(), "registry/pods/web-1", "pod"); err != nil {
		t.Fatal(err)
	}
	conn := j.zkConn(t, 0)
	if _, err := conn.Create("/app/workers", []byte("w"), 0, zk.DigestACL(zk.PermRead|zk.PermWrite, "alice", "secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/app/member-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	run(t, ctx, "open deep link", chromedp.Navigate(j.base+"/ui/?path=/app/config/db"))
	waitText(t, ctx, "#etcd-kv", "mod_revision")
	rev := strconv.FormatInt(put.Header.Revision, 10)
	if got := textOf(t, ctx, `#etcd-kv [data-field="mod_revision"]`); got != rev {
		t.Errorf("etcd mod_revision shows %q, want %s", got, rev)
	}
	if got := textOf(t, ctx, `#zk-stat [data-field="mzxid"]`); got != "0x"+strconv.FormatInt(put.Header.Revision, 16) {
		t.Errorf("ZooKeeper mzxid shows %q, want 0x%x", got, put.Header.Revision)
	}
	if got := textOf(t, ctx, `#zk-stat [data-field="version"]`); got != "0" {
		t.Errorf("ZooKeeper version shows %q, want 0 (etcd version 1)", got)
	}
	waitText(t, ctx, "#value", `"host": "db1"`) // JSON rendered
	waitText(t, ctx, "#children", "db")
	screenshot(t, ctx, "tree")

	run(t, ctx, "open /app/workers", chromedp.Navigate(j.base+"/ui/?path=/app/workers"))
	waitText(t, ctx, "#zk-acl", "digest")
	waitText(t, ctx, "#zk-acl", "rw")

	run(t, ctx, "open /app", chromedp.Navigate(j.base+"/ui/?path=/app"))
	waitText(t, ctx, "#flags", "implicit parent")
	waitText(t, ctx, "#etcd-kv", "does not return")
	waitText(t, ctx, "#children", "ephemeral")

	run(t, ctx, "open /", chromedp.Navigate(j.base+"/ui/"))
	waitText(t, ctx, "#nonpath", "registry/pods/web-1")
	run(t, ctx, "follow the non-path key", chromedp.Click(chromedp.CSS(`#nonpath a`)))
	waitText(t, ctx, "#zk-stat", "cannot see")
	waitText(t, ctx, "#value", "pod")
}

// TestBrowserWriteSeenByBothClients sets a value from the console, with
// its version check, and reads it back with an etcd and a ZooKeeper
// client; then a stale write is refused.
func TestBrowserWriteSeenByBothClients(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	conn := j.zkConn(t, 0)
	if _, err := conn.Create("/svc", []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open /svc", chromedp.Navigate(j.base+"/ui/?path=/svc"))
	waitText(t, ctx, "#value", "v1")
	run(t, ctx, "set a value",
		chromedp.SetValue(chromedp.CSS("#set-value"), "from the console"),
		chromedp.Click(chromedp.CSS("#set-submit")))
	waitText(t, ctx, "#value", "from the console")

	resp, err := j.etcd.Get(t.Context(), "/svc")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "from the console" {
		t.Fatalf("etcd reads %v (%v), want the console's value", resp, err)
	}
	data, stat, err := conn.Get("/svc")
	if err != nil || string(data) != "from the console" || stat.Version != 1 {
		t.Fatalf("ZooKeeper reads %q version %d (%v), want the console's value at version 1", data, stat.Version, err)
	}

	// Someone else writes; the page still shows version 2, so its write
	// must be refused.
	if _, err := conn.Set("/svc", []byte("by zk"), 1); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "set from a stale page",
		chromedp.SetValue(chromedp.CSS("#set-value"), "stale"),
		chromedp.Click(chromedp.CSS("#set-submit")))
	waitText(t, ctx, "#write-result", "version check failed")
	if data, _, err := conn.Get("/svc"); err != nil || string(data) != "by zk" {
		t.Fatalf("after the refused write ZooKeeper reads %q (%v), want \"by zk\"", data, err)
	}

	run(t, ctx, "create a child",
		chromedp.Navigate(j.base+"/ui/?path=/svc"),
		chromedp.WaitVisible(chromedp.CSS("#create-name")),
		chromedp.SetValue(chromedp.CSS("#create-name"), "child"),
		chromedp.SetValue(chromedp.CSS("#create-value"), "c"),
		chromedp.Click(chromedp.CSS("#create-submit")))
	waitText(t, ctx, "#node-title", "/svc/child")
	if data, _, err := conn.Get("/svc/child"); err != nil || string(data) != "c" {
		t.Fatalf("ZooKeeper reads /svc/child %q (%v), want the console's create", data, err)
	}
}

// TestBrowserBigParent opens a parent with 100,000 children, scrolls the
// virtual list to its end and checks the last child is drawn, while the
// page holds only the rows in sight.
func TestBrowserBigParent(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	const total = 100000
	fill(t, j.etcd, "/big", total)
	run(t, ctx, "open /big", chromedp.Navigate(j.base+"/ui/?path=/big"))
	waitText(t, ctx, "#child-count", strconv.Itoa(total))
	eval[int](t, ctx, `(() => { const l = document.getElementById('children'); l.scrollTop = l.scrollHeight; return 0; })()`)
	waitText(t, ctx, "#children", childName(total-1))
	screenshot(t, ctx, "big-list")
	rows := eval[int](t, ctx, `document.querySelectorAll('#children .row').length`)
	if rows == 0 || rows > 100 {
		t.Errorf("%d rows drawn, want only the ones in sight", rows)
	}
	// Keyboard: focus the list and walk up a row.
	run(t, ctx, "arrow keys", chromedp.Focus(chromedp.CSS(`#children .row[data-index="99999"]`)), chromedp.KeyEvent(kb.ArrowUp))
	focused := eval[string](t, ctx, `document.activeElement.dataset.index`)
	if focused != "99998" {
		t.Errorf("after ArrowUp the focus is on row %q, want 99998", focused)
	}
}

// TestBrowserSessionsAndLocks takes a lock with etcd's concurrency.Mutex
// and one with kazoo, and checks the sessions view lists the session and
// the lease, and the locks view shows each holder with its fencing token
// and the waiter in order.
func TestBrowserSessionsAndLocks(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)

	s1, err := concurrency.NewSession(j.etcd, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	m1 := concurrency.NewMutex(s1, "/locks/etcd-res")
	if err := m1.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A second contender queues behind the first.
	s2, err := concurrency.NewSession(j.etcd, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	waiter := make(chan error, 1)
	m2 := concurrency.NewMutex(s2, "/locks/etcd-res")
	wctx, cancelWaiter := context.WithCancel(t.Context())
	defer cancelWaiter()
	go func() { waiter <- m2.Lock(wctx) }()

	// kazoo takes its lock and holds it until its stdin closes.
	kz := testenv.PythonCommand(t.Context(), t, `
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start()
lock = zk.Lock("/locks/kazoo-res", "kazoo-holder")
lock.acquire()
print("locked", flush=True)
sys.stdin.read()
`, j.c.Nodes[0].ZKAddr)
	stdin, err := kz.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := kz.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := kz.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); kz.Wait() }()
	buf := make([]byte, 7)
	if _, err := stdout.Read(buf); err != nil || string(buf[:6]) != "locked" {
		t.Fatalf("kazoo did not take its lock: %q %v", buf, err)
	}

	// The holder keys and their create revisions, from etcd.
	etcdHolder, err := j.etcd.Get(t.Context(), m1.Key())
	if err != nil || len(etcdHolder.Kvs) != 1 {
		t.Fatalf("etcd holder key: %v %v", etcdHolder, err)
	}
	kazooKeys, err := j.etcd.Get(t.Context(), "/locks/kazoo-res/", clientv3.WithPrefix())
	if err != nil || len(kazooKeys.Kvs) != 1 {
		t.Fatalf("kazoo lock keys: %v %v", kazooKeys, err)
	}
	waitKeys(t, j, "/locks/etcd-res/", 2)

	run(t, ctx, "open locks", chromedp.Navigate(j.base+"/ui/?view=locks&prefix=/locks/"))
	waitText(t, ctx, "#locks", "kazoo Lock")
	etcdRow := `#locks tr[data-prefix="/locks/etcd-res"]`
	if got := textOf(t, ctx, etcdRow+" .token"); got != strconv.FormatInt(etcdHolder.Kvs[0].CreateRevision, 10) {
		t.Errorf("etcd lock token shows %q, want the holder's create revision %d", got, etcdHolder.Kvs[0].CreateRevision)
	}
	if got := textOf(t, ctx, etcdRow+" .holder"); got != m1.Key() {
		t.Errorf("etcd lock holder shows %q, want %s", got, m1.Key())
	}
	waitText(t, ctx, etcdRow+" .waiters", fmt.Sprintf("/locks/etcd-res/%x", s2.Lease()))
	kazooRow := `#locks tr[data-prefix="/locks/kazoo-res"]`
	if got := textOf(t, ctx, kazooRow+" .token"); got != strconv.FormatInt(kazooKeys.Kvs[0].CreateRevision, 10) {
		t.Errorf("kazoo lock token shows %q, want %d", got, kazooKeys.Kvs[0].CreateRevision)
	}
	screenshot(t, ctx, "locks")

	run(t, ctx, "open sessions", chromedp.Navigate(j.base+"/ui/?view=sessions"))
	waitText(t, ctx, "#sessions", "zookeeper")
	waitText(t, ctx, "#sessions", fmt.Sprintf("0x%x", s1.Lease()))
	waitText(t, ctx, "#sessions", "/locks/kazoo-res/")
	screenshot(t, ctx, "sessions")

	// Revoking the holder's lease from the console (after confirming)
	// hands the lock to the waiter.
	eval[bool](t, ctx, `(window.confirm = () => true, true)`)
	run(t, ctx, "revoke", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sessions tr[data-lease="%x"] button`, s1.Lease()))))
	select {
	case err := <-waiter:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter did not get the lock after the holder's lease was revoked from the console")
	}
}

// waitKeys waits until n keys exist under prefix.
func waitKeys(t *testing.T, j *janus, prefix string, n int) {
	t.Helper()
	for {
		resp, err := j.etcd.Get(t.Context(), prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) >= n {
			return
		}
		w := j.etcd.Watch(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		<-w
	}
}

// TestBrowserEvents watches a prefix in the console and checks that a
// ZooKeeper create and an etcd put show as both faces report them.
func TestBrowserEvents(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	run(t, ctx, "open events", chromedp.Navigate(j.base+"/ui/?view=events&prefix=/ev"))
	waitText(t, ctx, "#events-state", "live")
	conn := j.zkConn(t, 0)
	if _, err := conn.Create("/ev", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Put(t.Context(), "/ev/deep/key", "hello"); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#event-rows", "NodeCreated /ev/deep/key")
	waitText(t, ctx, "#event-rows", "NodeChildrenChanged /ev/deep")
	waitText(t, ctx, "#event-rows", `PUT version 1 value "hello"`)
	waitText(t, ctx, "#event-rows", "none (implicit parent)") // /ev/deep appeared for ZooKeeper only
	screenshot(t, ctx, "events")

	// An open stream must not hold up a graceful stop, and the page says
	// it lost the stream and tries again after the last revision it saw.
	if err := j.c.Stop(0, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#events-state", "reconnecting (after revision")
}

// TestBrowserEventsFromRevision picks a past revision in the page and
// sees the changes made before the page opened; then one of a compacted
// revision is refused as etcd refuses it.
func TestBrowserEventsFromRevision(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	first, err := j.etcd.Put(t.Context(), "/past/a", "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Put(t.Context(), "/past/b", "two"); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open events", chromedp.Navigate(j.base+"/ui/?view=events&prefix=/past/"),
		chromedp.WaitVisible(chromedp.CSS("#events-rev")))
	waitText(t, ctx, "#events-state", "live")
	rev := strconv.FormatInt(first.Header.Revision, 10)
	run(t, ctx, "pick a revision",
		chromedp.SetValue(chromedp.CSS("#events-rev"), rev),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)))
	waitText(t, ctx, "#event-rows", `PUT version 1 value "one"`)
	waitText(t, ctx, "#event-rows", `PUT version 1 value "two"`)
	if got := eval[string](t, ctx, `location.search`); !strings.Contains(got, "rev="+rev) {
		t.Errorf("the page's URL is %q, want it to carry rev=%s so the link can be shared", got, rev)
	}

	last, err := j.etcd.Put(t.Context(), "/past/c", "three")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Compact(t.Context(), last.Header.Revision); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open a compacted revision", chromedp.Navigate(j.base+"/ui/?view=events&prefix=/past/&rev="+rev))
	waitText(t, ctx, "#events-state", fmt.Sprintf("compacted (compact_revision %d)", last.Header.Revision))
}

// TestBrowserEventsResume stops the member serving the page while
// another takes a write, and checks the page, once the member is back,
// resumes after the last revision it saw and shows the write it missed.
func TestBrowserEventsResume(t *testing.T) {
	j := start(t, 3)
	ctx := browser(t)
	run(t, ctx, "open events", chromedp.Navigate(j.base+"/ui/?view=events&prefix=/r/"))
	waitText(t, ctx, "#events-state", "live")
	if _, err := j.etcd.Put(t.Context(), "/r/before", "seen live"); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#event-rows", "seen live")
	if err := j.c.Stop(0, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#events-state", "reconnecting")
	// The client fails over to another member for this write; a put
	// that meets the election is tried again.
	for {
		_, err := j.etcd.Put(t.Context(), "/r/while-away", "missed")
		if err == nil {
			break
		}
		if t.Context().Err() != nil {
			t.Fatal(err)
		}
		t.Logf("put while member 1 is away: %v; again", err)
	}
	if err := j.c.Restart(0); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#events-state", "resumed after revision")
	waitText(t, ctx, "#event-rows", `"missed"`)
	if n := eval[int](t, ctx, `[...document.querySelectorAll('#event-rows tr')].filter(r => r.textContent.includes('seen live')).length`); n != 1 {
		t.Errorf("the change seen before the drop shows %d times, want once", n)
	}
}

// TestBrowserSearch searches the whole keyspace from the page and follows
// a result to its node.
func TestBrowserSearch(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	for _, k := range []string{"/app/web-1/config", "/app/db/config", "registry/pods/web-1"} {
		if _, err := j.etcd.Put(t.Context(), k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "search from the page", chromedp.Navigate(j.base+"/ui/?view=search"),
		chromedp.WaitVisible(chromedp.CSS("#search-q")),
		chromedp.SetValue(chromedp.CSS("#search-mode"), "contains"),
		chromedp.SetValue(chromedp.CSS("#search-q"), "web-1"),
		chromedp.Click(chromedp.CSS("#search-submit")))
	waitText(t, ctx, "#search-count", "search complete")
	got := textOf(t, ctx, "#search-results")
	for _, want := range []string{"/app/web-1/config", `"registry/pods/web-1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("results %q lack %s", got, want)
		}
	}
	if strings.Contains(got, "/app/db/config") {
		t.Errorf("results %q hold /app/db/config, which does not contain web-1", got)
	}
	if url := eval[string](t, ctx, `location.search`); !strings.Contains(url, "view=search") || !strings.Contains(url, "q=web-1") || !strings.Contains(url, "mode=contains") {
		t.Errorf("the search's URL is %q, want view, q and mode in it", url)
	}
	screenshot(t, ctx, "search")
	run(t, ctx, "follow a result", chromedp.Click(chromedp.CSS(`#search-results a`)))
	waitText(t, ctx, "#node-title", "/app/web-1/config")
	waitText(t, ctx, "#etcd-kv", "mod_revision")

	// A prefix search opened from its own URL.
	run(t, ctx, "open a prefix search", chromedp.Navigate(j.base+"/ui/?view=search&q=/app/"))
	waitText(t, ctx, "#search-count", "2 found")
}

// TestBrowserCluster shows three members, then kills one and checks the
// cluster view shows it down.
func TestBrowserCluster(t *testing.T) {
	j := start(t, 3)
	ctx := browser(t)
	run(t, ctx, "open cluster", chromedp.Navigate(j.base+"/ui/?view=cluster"))
	waitText(t, ctx, "#members", "leader")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('#members td.up').length === 3`, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("waiting for three members up: %v", err)
	}
	// Writes while the page watches: the throughput chart, drawn from the
	// member's own counters, must rise above zero.
	wctx, stopWrites := context.WithCancel(t.Context())
	writes := make(chan error, 1)
	go func() {
		for i := 0; wctx.Err() == nil; i++ {
			if _, err := j.etcd.Put(wctx, fmt.Sprintf("/load/%d", i%100), "x"); err != nil && wctx.Err() == nil {
				writes <- err
				return
			}
		}
		writes <- nil
	}()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const c = document.querySelector('#chart-throughput figcaption'); const l = document.querySelector('#chart-throughput polyline');
		return !!c && / [1-9][0-9.]* per s peak/.test(c.textContent) && l.getAttribute('points').split(' ').length >= 3; })()`,
		chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("the throughput chart never showed the writes: %v", err)
	}
	screenshot(t, ctx, "cluster")
	stopWrites()
	if err := <-writes; err != nil {
		t.Fatalf("writes: %v", err)
	}
	j.c.Kill(2)
	// The view refreshes itself; the killed member's row turns down.
	waitText(t, ctx, `#members tr[data-member="3"] .health`, "down")

	// An alarm raised in the cluster shows in the summary.
	if _, err := pb.NewMaintenanceClient(j.etcd.ActiveConnection()).Alarm(t.Context(),
		&pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `#cluster-summary [data-field="alarms"]`, "memberID:1 alarm:NOSPACE")
}

// TestBrowserLogin turns etcd auth on and checks the console asks for a
// login, then shows only what the user may read.
func TestBrowserLogin(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	for _, k := range []string{"/team/a/x", "/secret/y"} {
		if _, err := j.etcd.Put(t.Context(), k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	// A lease holding a key alice may not write: she may not revoke it.
	lease, err := j.etcd.Grant(t.Context(), 300)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Put(t.Context(), "/secret/leased", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	enableAuth(t, j.etcd)
	run(t, ctx, "open", chromedp.Navigate(j.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#login-name")))
	if got := textOf(t, ctx, "form.login"); strings.Contains(got, "etcdserver") {
		t.Errorf("the login form shows an error before any attempt: %q", got)
	}
	screenshot(t, ctx, "login")
	run(t, ctx, "log in",
		chromedp.SendKeys(chromedp.CSS("#login-name"), "alice"),
		chromedp.SendKeys(chromedp.CSS("#login-password"), "alice-pw\r"))
	waitText(t, ctx, "#who", "alice")
	waitText(t, ctx, "#children", "team")
	if got := textOf(t, ctx, "#children"); strings.Contains(got, "secret") {
		t.Errorf("alice's root lists %q: she may not see /secret", got)
	}
	run(t, ctx, "open a forbidden node", chromedp.Navigate(j.base+"/ui/?path=/secret/y"))
	waitText(t, ctx, "main", "permission denied")

	// Revoking that lease from the console is refused as etcd refuses
	// alice, and the lease stays.
	row := fmt.Sprintf(`#sessions tr[data-lease="%x"]`, lease.ID)
	run(t, ctx, "open sessions", chromedp.Navigate(j.base+"/ui/?view=sessions"), chromedp.WaitVisible(chromedp.CSS(row)))
	if got := textOf(t, ctx, row); strings.Contains(got, "/secret/leased") {
		t.Errorf("alice's sessions view names %q, which she may not read", got)
	}
	eval[bool](t, ctx, `(window.confirm = () => true, true)`)
	run(t, ctx, "revoke without the right", chromedp.Click(chromedp.CSS(row+" button")))
	waitText(t, ctx, "#status", "permission denied")
	root, err := clientv3.New(clientv3.Config{Endpoints: j.c.EtcdEndpoints(), Username: "root", Password: "root-pw", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if ttl, err := root.TimeToLive(t.Context(), lease.ID); err != nil || ttl.TTL <= 0 {
		t.Errorf("after alice's refused revoke the lease reads %+v (%v), want it alive", ttl, err)
	}
}

// TestBrowserMigration builds one of each thing a move would lose and
// checks the readiness view lists each on its side, with the commands.
func TestBrowserMigration(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	conn := j.zkConn(t, 0)
	for _, step := range []func() error{
		func() error { _, err := conn.Create("/m", nil, 0, zk.WorldACL(zk.PermAll)); return err },
		func() error {
			_, err := conn.Create("/m/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			return err
		},
		func() error {
			_, err := conn.CreateContainer("/m/box", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			return err
		},
		func() error {
			_, err := conn.CreateTTL("/m/ttl", nil, zk.FlagTTL, zk.WorldACL(zk.PermAll), time.Hour)
			return err
		},
		func() error {
			_, err := conn.Create("/m/acl", nil, 0, zk.DigestACL(zk.PermAll, "bob", "pw"))
			return err
		},
		func() error { _, err := j.etcd.Put(t.Context(), "/m\x01bad", "x"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := j.etcd.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Put(t.Context(), "/m/leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open migration", chromedp.Navigate(j.base+"/ui/?view=migration&prefix=/m"))
	for kind, key := range map[string]string{"ephemeral": "/m/eph", "container": "/m/box", "ttl": "/m/ttl", "acl": "/m/acl"} {
		waitText(t, ctx, `#to-etcd tr[data-kind="`+kind+`"]`, key)
	}
	waitText(t, ctx, `#to-zk tr[data-kind="leased key"]`, "/m/leased")
	waitText(t, ctx, `#to-zk tr[data-kind="non-path key"]`, "/m\x01bad")
	waitText(t, ctx, "#to-etcd pre", "janus migrate --dry-run --from etcd://"+j.c.Nodes[0].EtcdAddr+"/m")
	waitText(t, ctx, "#to-zk pre", "janus migrate --dry-run --from zk://"+j.c.Nodes[0].ZKAddr+"/m")
	screenshot(t, ctx, "migration")
}

// TestBrowserCuratorLocks has Curator take an InterProcessMutex and lead
// a LeaderLatch and a LeaderSelector, and checks the locks view names both recipes with the
// holders' fencing tokens.
func TestBrowserCuratorLocks(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	cmd := testenv.JavaCommand(t.Context(), t, filepath.Join("testdata", "CuratorLocks.java"), "CuratorLocks", j.c.Nodes[0].ZKAddr, "/curator")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "ready" {
		t.Fatalf("Curator did not take its locks: %q %v", buf, err)
	}
	for _, lock := range []struct{ prefix, recipe string }{
		{"/curator/mutex", "Curator InterProcessMutex"},
		{"/curator/latch", "Curator LeaderLatch"},
		{"/curator/selector", "Curator InterProcessMutex/LeaderSelector"},
	} {
		resp, err := j.etcd.Get(t.Context(), lock.prefix+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: %v %v", lock.prefix, resp, err)
		}
		run(t, ctx, "open locks", chromedp.Navigate(j.base+"/ui/?view=locks&prefix=/curator/"))
		row := `#locks tr[data-prefix="` + lock.prefix + `"]`
		waitText(t, ctx, row, lock.recipe)
		if got := textOf(t, ctx, row+" .token"); got != strconv.FormatInt(resp.Kvs[0].CreateRevision, 10) {
			t.Errorf("%s token shows %q, want %d", lock.prefix, got, resp.Kvs[0].CreateRevision)
		}
		if got := textOf(t, ctx, row+" .holder"); got != string(resp.Kvs[0].Key) {
			t.Errorf("%s holder shows %q, want %s", lock.prefix, got, resp.Kvs[0].Key)
		}
	}
}

// TestBrowserHistoryHexDelete shows a key's history with its line diff,
// its value as hex, a container's and a TTL node's flags, and deletes the
// key from the console with its version check, which both clients then
// see.
func TestBrowserHistoryHexDelete(t *testing.T) {
	j := start(t, 1)
	ctx := browser(t)
	for _, v := range []string{"a\nb", "a\nc"} {
		if _, err := j.etcd.Put(t.Context(), "/h", v); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "open /h", chromedp.Navigate(j.base+"/ui/?path=/h"),
		chromedp.WaitVisible(chromedp.CSS("#history-load")),
		chromedp.Click(chromedp.CSS("#history-load")))
	waitText(t, ctx, "#history del", "b")
	waitText(t, ctx, "#history ins", "c")
	if got := eval[int](t, ctx, `document.querySelectorAll('#history tbody tr').length`); got != 2 {
		t.Errorf("history shows %d versions, want 2", got)
	}
	eval[bool](t, ctx, `(() => { const s = document.getElementById('value-as'); s.value = 'hex'; return s.dispatchEvent(new Event('change')); })()`)
	waitText(t, ctx, "#value", "61 0a 63")

	conn := j.zkConn(t, 0)
	if _, err := conn.CreateContainer("/box", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CreateTTL("/ttl", nil, zk.FlagTTL, zk.WorldACL(zk.PermAll), time.Hour); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open /box", chromedp.Navigate(j.base+"/ui/?path=/box"))
	waitText(t, ctx, "#flags", "container")
	run(t, ctx, "open /ttl", chromedp.Navigate(j.base+"/ui/?path=/ttl"))
	waitText(t, ctx, "#flags", "TTL node")

	run(t, ctx, "open /h again", chromedp.Navigate(j.base+"/ui/?path=/h"), chromedp.WaitVisible(chromedp.CSS("#delete-submit")))
	eval[bool](t, ctx, `(window.confirm = () => true, true)`)
	run(t, ctx, "delete", chromedp.Click(chromedp.CSS("#delete-submit")))
	waitText(t, ctx, "main", "No such node or key")
	if resp, err := j.etcd.Get(t.Context(), "/h"); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("etcd still reads /h after the console's delete: %v %v", resp, err)
	}
	if ok, _, err := conn.Exists("/h"); err != nil || ok {
		t.Errorf("ZooKeeper still sees /h after the console's delete (%v)", err)
	}
}
