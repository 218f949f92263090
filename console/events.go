package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/januskv/janus/core"
)

// zkEvent is a ZooKeeper watch event as a client watching the path would
// get it.
type zkEvent struct {
	Type string `json:"type"`
	Path string `json:"path"`
}

// etcdEvent is an etcd watch event in etcd's JSON names.
type etcdEvent struct {
	Type   string  `json:"type"`
	KV     *etcdKV `json:"kv"`
	PrevKV *etcdKV `json:"prev_kv,omitempty"`
}

// liveEvent is one change as both faces report it: the etcd event (none
// for an implicit parent, which etcd does not see) and the ZooKeeper watch
// events (none for a key that is not a path).
type liveEvent struct {
	Rev  int64      `json:"rev"`
	Key  string     `json:"key"`
	Etcd *etcdEvent `json:"etcd"`
	ZK   []zkEvent  `json:"zk"`
}

// keepAlive is how often an idle stream sends a comment, so proxies and
// browsers do not take it for dead.
const keepAlive = 15 * time.Second

// events answers /ui/api/events?prefix=&rev= with server-sent events:
// every change under prefix that the user may read, one "change" event
// per key, from revision rev on (from now on without it). The last event
// of each revision carries the revision as its id (and the stream opens
// with the revision before its first), so a browser that lost
// the stream and comes back with Last-Event-ID continues after the last
// revision it saw, with nothing missed or repeated. A start below the
// compacted revision gets one "compacted" event naming the compacted
// revision, as an etcd watch is canceled with compact_revision set. The
// stream ends when the browser leaves, the console closes or the member's
// event stream breaks (an "error" event says why).
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	user, err := c.identify(r)
	if err != nil {
		ae := err.(*apiError)
		http.Error(w, ae.msg, ae.status)
		return
	}
	req := &request{Request: r, user: user}
	prefix := []byte(r.URL.Query().Get("prefix"))
	from, err := startRev(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if from == 0 {
		// From now on: the stream names where "now" is, so that a
		// browser that loses it before any change comes back to the
		// same place.
		cur, err := c.cfg.Backend.Rev()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		from = cur + 1
	}
	sub, err := c.cfg.Backend.Watch(from)
	if err != nil {
		c.log.Warn("console event stream refused", "err", err)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": stream open\nid: %d\n\n", from-1)
	if flusher != nil {
		flusher.Flush()
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			return
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case re, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); errors.Is(err, core.ErrCompacted) {
					fmt.Fprintf(w, "event: compacted\ndata: {\"compact_revision\":%d}\n\n", c.cfg.Backend.Status().CompactRev)
				} else {
					fmt.Fprintf(w, "event: error\ndata: %q\n\n", fmt.Sprint("event stream ended: ", err))
				}
				if flusher != nil {
					flusher.Flush()
				}
				return
			}
			var shown []liveEvent
			for _, ev := range re.Events {
				if bytes.HasPrefix(ev.Node.Key, prefix) && c.mayReadNode(req, ev.Node) {
					shown = append(shown, bothFaces(re.Rev, ev))
				}
			}
			for i, le := range shown {
				b, err := json.Marshal(le)
				if err != nil {
					c.log.Error("console event not encoded", "err", err) // only plain data: cannot happen
					return
				}
				if i == len(shown)-1 {
					fmt.Fprintf(w, "id: %d\n", re.Rev)
				}
				fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// startRev is the first revision a stream sends: the one after the
// Last-Event-ID a reconnecting browser sends, else ?rev=, else 0 (from
// the next revision on).
func startRev(r *http.Request) (int64, error) {
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("Last-Event-ID %q is not a revision", id)
		}
		return n + 1, nil
	}
	s := r.URL.Query().Get("rev")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("rev %q is not a revision", s)
	}
	return n, nil
}

// bothFaces describes one core event as an etcd watcher and a ZooKeeper
// watcher of the key and its parent would see it.
func bothFaces(rev int64, ev core.Event) liveEvent {
	key := ev.Node.Key
	le := liveEvent{Rev: rev, Key: string(key), ZK: []zkEvent{}}
	if !ev.Implicit {
		e := &etcdEvent{Type: "PUT", KV: kvOf(ev.Node)}
		if ev.Type == core.EventDelete {
			e.Type = "DELETE"
		}
		if ev.Prev != nil && !ev.Prev.Implicit {
			e.PrevKV = kvOf(ev.Prev)
		}
		le.Etcd = e
	}
	if !core.IsTreePath(key) {
		return le
	}
	path := string(key)
	created := ev.Type == core.EventPut && (ev.Prev == nil || ev.Implicit) && !ev.WasImplicit
	switch {
	case ev.Type == core.EventDelete:
		le.ZK = append(le.ZK, zkEvent{"NodeDeleted", path})
	case created:
		le.ZK = append(le.ZK, zkEvent{"NodeCreated", path})
	default:
		le.ZK = append(le.ZK, zkEvent{"NodeDataChanged", path})
	}
	if parent, ok := core.ParentPath(key); ok && (created || ev.Type == core.EventDelete) {
		le.ZK = append(le.ZK, zkEvent{"NodeChildrenChanged", string(parent)})
	}
	return le
}
