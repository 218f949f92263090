package console

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/januskv/janus/core"
)

// fakeBackend answers what the cluster view asks; the rest of
// core.Backend is left out (a call would panic).
type fakeBackend struct {
	core.Backend
	status core.Status
}

func (b *fakeBackend) Status() core.Status  { return b.status }
func (b *fakeBackend) Alarms() []core.Alarm { return nil }

// fakeClient is a member client that counts its calls.
type fakeClient struct {
	url              string
	statuses, closed int
}

func (f *fakeClient) Status(context.Context) MemberState { f.statuses++; return MemberState{Up: true} }
func (f *fakeClient) Close() error                       { f.closed++; return nil }

// TestClusterKeepsOneClientPerMember refreshes the cluster view several
// times and checks the console dials each other member once, dials again
// only for a member whose client URL changed, closes the client of a
// member that left, and closes the rest when it closes.
func TestClusterKeepsOneClientPerMember(t *testing.T) {
	b := &fakeBackend{status: core.Status{MemberID: 1, LeaderID: 1, Members: []core.ClusterMember{
		{ID: 1, EtcdURL: "http://a"}, {ID: 2, EtcdURL: "http://b"}, {ID: 3, EtcdURL: "http://c"},
	}}}
	var dialed []*fakeClient
	c := New(Config{Backend: b, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial: func(m core.ClusterMember) (MemberClient, error) {
			f := &fakeClient{url: m.EtcdURL}
			dialed = append(dialed, f)
			return f, nil
		}})
	refresh := func() {
		t.Helper()
		req := &request{Request: httptest.NewRequest("GET", "/ui/api/cluster", nil)}
		if _, err := c.cluster(req); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		refresh()
	}
	if len(dialed) != 2 || dialed[0].statuses != 5 || dialed[1].statuses != 5 {
		t.Fatalf("after 5 refreshes: %d dials (%+v), want 2 clients asked 5 times each", len(dialed), dialed)
	}
	byURL := map[string]*fakeClient{}
	for _, f := range dialed {
		byURL[f.url] = f
	}

	// Member 3 moves to a new address and member 2 leaves.
	b.status.Members = []core.ClusterMember{{ID: 1, EtcdURL: "http://a"}, {ID: 3, EtcdURL: "http://c2"}}
	refresh()
	refresh()
	if len(dialed) != 3 || dialed[2].url != "http://c2" || dialed[2].statuses != 2 {
		t.Fatalf("after the change: dials %+v, want one more, for http://c2, asked twice", dialed)
	}
	if byURL["http://b"].closed != 1 || byURL["http://c"].closed != 1 {
		t.Errorf("the clients of the member that left and of the old address: closed %d and %d times, want once each",
			byURL["http://b"].closed, byURL["http://c"].closed)
	}

	c.Close()
	if dialed[2].closed != 1 {
		t.Errorf("Close closed the remaining client %d times, want once", dialed[2].closed)
	}
	refresh() // after Close nothing is dialled again
	if len(dialed) != 3 {
		t.Errorf("a refresh after Close dialled again: %+v", dialed)
	}
}
