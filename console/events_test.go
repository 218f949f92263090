package console_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sse is one server-sent event.
type sse struct {
	typ, data, id string
}

// openEvents opens /ui/api/events with q and, if lastID is set, the
// Last-Event-ID header a reconnecting browser sends.
func openEvents(t *testing.T, j *janus, q url.Values, lastID string) *bufio.Reader {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, j.base+"/ui/api/events?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events %v: status %d", q, resp.StatusCode)
	}
	return bufio.NewReader(resp.Body)
}

// next reads the next event block (comment-only blocks included, as an
// event of type "").
func next(t *testing.T, r *bufio.Reader) sse {
	t.Helper()
	var ev sse
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return ev
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data += line[6:]
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		}
	}
}

// nextChange skips to the next "change" event and returns its revision
// and key.
func nextChange(t *testing.T, r *bufio.Reader) (sse, int64, string) {
	t.Helper()
	for {
		ev := next(t, r)
		if ev.typ == "" {
			continue
		}
		if ev.typ != "change" {
			t.Fatalf("event %q %s, want a change", ev.typ, ev.data)
		}
		var c struct {
			Rev int64  `json:"rev"`
			Key string `json:"key"`
		}
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatal(err)
		}
		return ev, c.Rev, c.Key
	}
}

// TestAPIEventsFromRevision starts the event stream at a past revision,
// resumes one after the last revision seen as a browser does with
// Last-Event-ID, and asks for a compacted revision.
func TestAPIEventsFromRevision(t *testing.T) {
	j := start(t, 1)
	ctx := t.Context()
	var revs []int64
	for _, k := range []string{"/ev/a", "/other", "/ev/b", "/ev/c"} {
		resp, err := j.etcd.Put(ctx, k, "v")
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	// Every change under /ev/ from the first put on, each with its
	// revision as its id.
	r := openEvents(t, j, url.Values{"prefix": {"/ev/"}, "rev": {strconv.FormatInt(revs[0], 10)}}, "")
	if ev := next(t, r); ev.id != strconv.FormatInt(revs[0]-1, 10) {
		t.Errorf("the stream opens with id %q, want %d (the revision before its first)", ev.id, revs[0]-1)
	}
	for _, want := range []struct {
		rev int64
		key string
	}{{revs[0], "/ev/a"}, {revs[2], "/ev/b"}, {revs[3], "/ev/c"}} {
		ev, rev, key := nextChange(t, r)
		if rev != want.rev || key != want.key || ev.id != strconv.FormatInt(want.rev, 10) {
			t.Fatalf("change %s at %d id %q, want %s at %d with that id", key, rev, ev.id, want.key, want.rev)
		}
	}

	// Coming back after /ev/b: the next change is /ev/c, nothing before.
	r = openEvents(t, j, url.Values{"prefix": {"/ev/"}, "rev": {strconv.FormatInt(revs[0], 10)}}, strconv.FormatInt(revs[2], 10))
	if _, rev, key := nextChange(t, r); rev != revs[3] || key != "/ev/c" {
		t.Errorf("resumed after %d: first change %s at %d, want /ev/c at %d", revs[2], key, rev, revs[3])
	}

	// From now on: the stream names the current revision, and shows the
	// next change only.
	r = openEvents(t, j, url.Values{"prefix": {"/ev/"}}, "")
	if ev := next(t, r); ev.id != strconv.FormatInt(revs[3], 10) {
		t.Errorf("a stream from now opens with id %q, want the current revision %d", ev.id, revs[3])
	}
	put, err := j.etcd.Put(ctx, "/ev/d", "v")
	if err != nil {
		t.Fatal(err)
	}
	if _, rev, key := nextChange(t, r); rev != put.Header.Revision || key != "/ev/d" {
		t.Errorf("from now: first change %s at %d, want /ev/d at %d", key, rev, put.Header.Revision)
	}

	// Below the compacted revision, the stream says so as etcd's watch
	// does, with the compacted revision.
	if _, err := j.etcd.Compact(ctx, revs[3], clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	r = openEvents(t, j, url.Values{"prefix": {"/ev/"}, "rev": {strconv.FormatInt(revs[0], 10)}}, "")
	for {
		ev := next(t, r)
		if ev.typ == "" {
			continue
		}
		var c struct {
			CompactRevision int64 `json:"compact_revision"`
		}
		if ev.typ != "compacted" || json.Unmarshal([]byte(ev.data), &c) != nil || c.CompactRevision != revs[3] {
			t.Errorf("from compacted revision %d: event %q %s, want compacted with compact_revision %d", revs[0], ev.typ, ev.data, revs[3])
		}
		break
	}

	resp, err := http.Get(j.base + "/ui/api/events?rev=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("rev=x: status %d, want 400", resp.StatusCode)
	}
}
