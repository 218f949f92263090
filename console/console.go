// Package console is Janus's web console: a page on the HTTP port (/ui/)
// that shows the one tree through both faces at once, with the JSON API
// (/ui/api/) it reads. It is a product face of its own, next to etcdapi and
// zkapi, and like them it reaches the member only through core.Backend:
// reads open a View, permissions are etcd's (a token from etcd's
// Authenticate, checked by the etcd face), and the page writes through
// the etcd JSON gateway, so a console write is an ordinary client write.
//
// The front end is plain JavaScript embedded in the binary: no framework,
// no build step, nothing fetched from elsewhere.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/januskv/janus/core"
)

//go:embed web
var webFiles embed.FS

// Config is what the console needs from the server it runs in.
type Config struct {
	Backend core.Backend
	Logger  *slog.Logger
	// TokenUser names the user of an etcd auth token, refusing one a
	// client request would be refused with (etcdapi.Server.TokenUser).
	// With auth disabled it returns "".
	TokenUser func(token string) (string, error)
	// SessionAddrs maps the ZooKeeper sessions connected to this member to
	// their clients' addresses (zkapi.Server.SessionAddrs); may be nil.
	SessionAddrs func() map[int64]string
	// LeaseClient names the client that granted an etcd lease through
	// this member (etcdapi.Server.LeaseClient), "" when unknown; may be
	// nil.
	LeaseClient func(id int64) string
	// Dial connects to another member, to ask it how it is (see
	// cluster.go); nil leaves the other members' figures out. The console
	// keeps one client per member and closes it when the member leaves
	// or the console closes.
	Dial func(m core.ClusterMember) (MemberClient, error)
}

// Console serves /ui/. Close ends the event streams it is serving and
// closes its clients of the other members.
type Console struct {
	cfg     Config
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	members memberClients
}

// New returns a console over cfg.Backend.
func New(cfg Config) *Console {
	ctx, cancel := context.WithCancel(context.Background())
	return &Console{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel}
}

// Close ends the live event streams, so that the HTTP server's shutdown
// does not wait for browsers to hang up, and closes the console's clients
// of the other members.
func (c *Console) Close() {
	c.cancel()
	c.members.close()
}

// Register installs the page at /ui/ and its API at /ui/api/.
func (c *Console) Register(mux *http.ServeMux) {
	static, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic("console: embedded files: " + err.Error()) // the embed pattern guarantees the directory
	}
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", noCache(http.FileServerFS(static))))
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	for path, h := range map[string]func(*request) (any, error){
		"whoami":    c.whoami,
		"node":      c.node,
		"children":  c.children,
		"keys":      c.keys,
		"search":    c.search,
		"history":   c.history,
		"sessions":  c.sessions,
		"cluster":   c.cluster,
		"locks":     c.locks,
		"migration": c.migration,
	} {
		mux.Handle("GET /ui/api/"+path, c.api(h))
	}
	mux.HandleFunc("GET /ui/api/events", c.events)
}

// noCache makes browsers revalidate the page's files, so an upgraded
// server is not shown with an old script.
func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// request is one API call: who makes it, and its query.
type request struct {
	*http.Request
	user string
}

// mayRead reports whether the request's user may read key (or [key, end)),
// by the same check the etcd face makes for a Range.
func (c *Console) mayRead(r *request, key, end []byte) bool {
	st := c.cfg.Backend.Auth()
	return !st.Enabled || st.Permitted(r.user, key, end, core.AuthRead)
}

// mayReadNode adds to mayRead the check an etcd Range makes on a znode
// with auth on: its ZooKeeper ACL must grant READ to etcd:<user> (root,
// like ZooKeeper's super, passes).
func (c *Console) mayReadNode(r *request, n *core.Node) bool {
	if !c.mayRead(r, n.Key, nil) {
		return false
	}
	st := c.cfg.Backend.Auth()
	if !st.Enabled || st.IsRoot(r.user) {
		return true
	}
	return core.CheckACL(n.ACL, core.PermRead, []core.ID{{Scheme: core.EtcdScheme, ID: r.user}})
}

// apiError is an error the API answers with its own status.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(msg string) error { return &apiError{http.StatusBadRequest, msg} }

// identify resolves the request's etcd token (the Authorization header,
// as etcd's JSON gateway takes it) to a user.
func (c *Console) identify(r *http.Request) (string, error) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" && c.cfg.Backend.Auth().Enabled {
		// Not a refused login but none yet: the page asks for one
		// without showing etcd's "user name is empty".
		return "", &apiError{http.StatusUnauthorized, "login required"}
	}
	user, err := c.cfg.TokenUser(token)
	if err != nil {
		return "", &apiError{http.StatusUnauthorized, rpctypes.ErrorDesc(err)}
	}
	if c.cfg.Backend.Auth().Enabled && user == "" {
		return "", &apiError{http.StatusUnauthorized, "login required"}
	}
	return user, nil
}

// api wraps a JSON answer: it identifies the caller, runs h and writes
// its answer or error as JSON ({"error": ...}).
func (c *Console) api(h func(*request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		user, err := c.identify(r)
		var out any
		if err == nil {
			out, err = h(&request{Request: r, user: user})
		}
		if err != nil {
			status := http.StatusInternalServerError
			var ae *apiError
			switch {
			case errors.As(err, &ae):
				status = ae.status
			case errors.Is(err, core.ErrCompacted), errors.Is(err, core.ErrFutureRev):
				status = http.StatusBadRequest
			default:
				c.log.Warn("console request failed", "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(status)
			out = map[string]string{"error": err.Error()}
		}
		if err := json.NewEncoder(w).Encode(out); err != nil {
			c.log.Debug("console answer not sent", "path", r.URL.Path, "err", err)
		}
	})
}

// whoami tells the page whether to ask for a login.
func (c *Console) whoami(r *request) (any, error) {
	return map[string]any{"authEnabled": c.cfg.Backend.Auth().Enabled, "user": r.user}, nil
}
