package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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

// events answers /ui/api/events?prefix= with server-sent events: every
// change under prefix from now on that the user may read, one "change"
// event per key. It ends when the browser leaves, the console closes or
// the member's event stream breaks (an "error" event says why).
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	user, err := c.identify(r)
	if err != nil {
		ae := err.(*apiError)
		http.Error(w, ae.msg, ae.status)
		return
	}
	req := &request{Request: r, user: user}
	prefix := []byte(r.URL.Query().Get("prefix"))
	sub, err := c.cfg.Backend.Watch(0)
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
	fmt.Fprint(w, ": stream open\n\n")
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
				fmt.Fprintf(w, "event: error\ndata: %q\n\n", fmt.Sprint("event stream ended: ", sub.Err()))
				if flusher != nil {
					flusher.Flush()
				}
				return
			}
			for _, ev := range re.Events {
				if !bytes.HasPrefix(ev.Node.Key, prefix) || !c.mayReadNode(req, ev.Node) {
					continue
				}
				b, err := json.Marshal(bothFaces(re.Rev, ev))
				if err != nil {
					c.log.Error("console event not encoded", "err", err) // only plain data: cannot happen
					return
				}
				fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
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
