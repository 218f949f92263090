// Package httpguard stands in front of the HTTP port and keeps web pages
// out of it: a page a browser loads from elsewhere can send requests to a
// server on the user's machine or network, and with DNS rebinding even
// read the answers. The guard refuses a Host that is not whitelisted (as
// etcd's --host-whitelist), answers CORS only for allowed origins (as
// etcd's --cors), and refuses the writes a page can send without a CORS
// preflight: a state-changing request with a foreign Origin, and an etcd
// gateway POST that is not application/json.
package httpguard

import (
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
)

// Config is the guard's policy.
type Config struct {
	// HostWhitelist lists the Host header names accepted (without port,
	// case-insensitive); "*" accepts any. Empty means: if ListenAddr is a
	// loopback address, loopback names only (localhost, 127.0.0.0/8, ::1),
	// so that a rebound DNS name cannot reach a server bound to loopback;
	// otherwise any. A TLS request is not checked, as in etcd: a rebound
	// name would not match the certificate.
	HostWhitelist []string
	// ListenAddr is the address the port listens on.
	ListenAddr string
	// CORS lists the origins allowed to call from a browser ("*": any).
	// Empty allows none: no CORS headers are sent and a state-changing
	// request with an Origin other than the server's own is refused.
	CORS []string
	// JSONPrefix is the path prefix whose POSTs must be application/json
	// (the etcd gateway, "/v3/").
	JSONPrefix string
	Logger     *slog.Logger
}

// Wrap returns next behind the guard.
func Wrap(next http.Handler, cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &guard{next: next, cfg: cfg, anyHost: slices.Contains(cfg.HostWhitelist, "*"), anyOrigin: slices.Contains(cfg.CORS, "*")}
	if len(cfg.HostWhitelist) == 0 {
		host, _, err := net.SplitHostPort(cfg.ListenAddr)
		if err != nil {
			host = cfg.ListenAddr
		}
		g.loopbackOnly = isLoopback(host)
		g.anyHost = !g.loopbackOnly
	}
	return g
}

type guard struct {
	next         http.Handler
	cfg          Config
	anyHost      bool
	loopbackOnly bool
	anyOrigin    bool
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil && !g.hostAllowed(r.Host) {
		g.cfg.Logger.Warn("refusing an HTTP request for a host not whitelisted (DNS rebinding?)", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, "host "+r.Host+" is not allowed (see --host-whitelist)", http.StatusMisdirectedRequest)
		return
	}
	origin := r.Header.Get("Origin")
	allowed := origin != "" && g.originAllowed(origin)
	if allowed {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE")
		h.Set("Access-Control-Allow-Headers", "accept, content-type, authorization")
		h.Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusOK)
		return
	}
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !safe && origin != "" && !allowed && !sameOrigin(origin, r.Host) {
		g.cfg.Logger.Warn("refusing a cross-origin write (see --cors)", "origin", origin, "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "cross-origin request refused: origin "+origin+" is not allowed (see --cors)", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodPost && g.cfg.JSONPrefix != "" && strings.HasPrefix(r.URL.Path, g.cfg.JSONPrefix) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			http.Error(w, "the request body must be Content-Type: application/json", http.StatusUnsupportedMediaType)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

func (g *guard) hostAllowed(hostport string) bool {
	if g.anyHost {
		return true
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if g.loopbackOnly {
		return isLoopback(host)
	}
	return slices.ContainsFunc(g.cfg.HostWhitelist, func(h string) bool { return strings.EqualFold(h, host) })
}

func (g *guard) originAllowed(origin string) bool {
	return g.anyOrigin || slices.Contains(g.cfg.CORS, origin)
}

// sameOrigin reports whether origin (scheme://host[:port]) names the host
// the request was sent to: the server's own pages, if it had any.
func sameOrigin(origin, host string) bool {
	_, rest, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(rest, host)
}

// isLoopback reports whether host is a loopback name or address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
