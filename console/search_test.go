package console_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
)

// searchPage is /ui/api/search's answer, as far as the tests read it.
type searchPage struct {
	Hits []struct {
		Key64  string `json:"key64"`
		IsPath bool   `json:"isPath"`
	} `json:"hits"`
	Scanned int    `json:"scanned"`
	Next    string `json:"next"`
}

func (p searchPage) keys() []string {
	var out []string
	for _, h := range p.Hits {
		out = append(out, unb64(h.Key64))
	}
	return out
}

// TestAPISearch searches the whole keyspace by prefix and by substring:
// a prefix search reads only the keys under it, a substring search stops
// after a bounded number of keys and continues from its cursor, and
// neither shows what the user may not read.
func TestAPISearch(t *testing.T) {
	j := start(t, 1)
	ctx := t.Context()
	const total = 25000 // more than one substring page examines
	fill(t, j.etcd, "/big", total)
	for _, k := range []string{"/app/config/db", "/app/config/web-1", "registry/pods/web-1", "/team/a/x", "/secret/web-1"} {
		if _, err := j.etcd.Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}

	var p searchPage
	j.get(t, "", "search", url.Values{"q": {"/app/"}}, &p)
	if got := p.keys(); !slices.Equal(got, []string{"/app/config/db", "/app/config/web-1"}) || p.Scanned != 2 || p.Next != "" {
		t.Errorf("prefix /app/: %v after %d keys (next %q), want the two keys under it, read alone", got, p.Scanned, p.Next)
	}

	// A prefix search pages with its cursor.
	j.get(t, "", "search", url.Values{"q": {"/big/"}, "limit": {"3"}}, &p)
	if got := p.keys(); !slices.Equal(got, []string{"/big/" + childName(0), "/big/" + childName(1), "/big/" + childName(2)}) || p.Next == "" {
		t.Fatalf("prefix /big/ limit 3: %v next %q", got, p.Next)
	}
	j.get(t, "", "search", url.Values{"q": {"/big/"}, "limit": {"2"}, "after64": {p.Next}}, &p)
	if got := p.keys(); !slices.Equal(got, []string{"/big/" + childName(3), "/big/" + childName(4)}) {
		t.Errorf("prefix /big/ after the cursor: %v, want %s and %s", got, childName(3), childName(4))
	}

	// A substring search examines a bounded number of keys per call:
	// the keys it wants sort after 25,000 others, so it takes more than
	// one call to reach them, each one continuing from the last.
	var found []string
	calls := 0
	for after := ""; ; calls++ {
		q := url.Values{"q": {"web-1"}, "mode": {"contains"}}
		if after != "" {
			q.Set("after64", after)
		}
		if code := j.get(t, "", "search", q, &p); code != http.StatusOK {
			t.Fatalf("contains web-1: status %d", code)
		}
		if p.Scanned > 20000 {
			t.Fatalf("one call examined %d keys", p.Scanned)
		}
		found = append(found, p.keys()...)
		if after = p.Next; after == "" {
			break
		}
	}
	if want := []string{"/app/config/web-1", "/secret/web-1", "registry/pods/web-1"}; !slices.Equal(found, want) || calls < 1 {
		t.Errorf("contains web-1: %v in %d calls after the first, want %v in more than one", found, calls, want)
	}

	var bad map[string]any
	if code := j.get(t, "", "search", url.Values{"q": {"x"}, "mode": {"regexp"}}, &bad); code != http.StatusBadRequest {
		t.Errorf("an unknown mode: status %d, want 400", code)
	}

	// With auth on, alice finds only what she may read: not /secret, and
	// not a znode whose ACL closes it to etcd:alice.
	conn := j.zkConn(t, 0)
	if _, err := conn.Create("/team/a/closed-web-1", nil, 0, zk.DigestACL(zk.PermAll, "bob", "pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Put(ctx, "/team/a/web-1", "v"); err != nil {
		t.Fatal(err)
	}
	enableAuth(t, j.etcd)
	token := login(t, j, "alice", "alice-pw")
	if code := j.get(t, "", "search", url.Values{"q": {"/"}}, &bad); code != http.StatusUnauthorized {
		t.Errorf("search without a token: status %d, want 401", code)
	}
	found = nil
	for after := ""; ; {
		q := url.Values{"q": {"web-1"}, "mode": {"contains"}}
		if after != "" {
			q.Set("after64", after)
		}
		j.get(t, token, "search", q, &p)
		found = append(found, p.keys()...)
		if after = p.Next; after == "" {
			break
		}
	}
	if want := []string{"/team/a/web-1"}; !slices.Equal(found, want) {
		t.Errorf("alice's search for web-1: %v, want %v", found, want)
	}
}

func unb64(s string) string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "(not base64: " + s + ")"
	}
	return string(b)
}
