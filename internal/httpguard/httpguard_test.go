package httpguard

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	loopback := Config{ListenAddr: "127.0.0.1:8080", JSONPrefix: "/v3/"}
	for _, tc := range []struct {
		name        string
		cfg         Config
		method      string
		path        string
		host        string
		origin      string
		contentType string
		tls         bool
		want        int
		wantCORS    string
	}{
		{name: "loopback host on a loopback listener", cfg: loopback, method: "GET", path: "/health", host: "localhost:8080", want: 200},
		{name: "127.0.0.2 is loopback too", cfg: loopback, method: "GET", path: "/health", host: "127.0.0.2:8080", want: 200},
		{name: "IPv6 loopback", cfg: loopback, method: "GET", path: "/health", host: "[::1]:8080", want: 200},
		{name: "rebound name on a loopback listener", cfg: loopback, method: "GET", path: "/health", host: "evil.example:8080", want: http.StatusMisdirectedRequest},
		{name: "rebound name over TLS is the certificate's problem", cfg: loopback, method: "GET", path: "/health", host: "evil.example:8080", tls: true, want: 200},
		{name: "any host on a public listener", cfg: Config{ListenAddr: "0.0.0.0:8080"}, method: "GET", path: "/health", host: "db.example", want: 200},
		{name: "whitelisted host", cfg: Config{ListenAddr: "127.0.0.1:8080", HostWhitelist: []string{"janus.example"}}, method: "GET", path: "/health", host: "JANUS.example:8080", want: 200},
		{name: "host not in the whitelist", cfg: Config{ListenAddr: "0.0.0.0:8080", HostWhitelist: []string{"janus.example"}}, method: "GET", path: "/health", host: "localhost", want: http.StatusMisdirectedRequest},
		{name: "whitelist *", cfg: Config{ListenAddr: "127.0.0.1:8080", HostWhitelist: []string{"*"}}, method: "GET", path: "/health", host: "anything", want: 200},
		{name: "gateway write as JSON", cfg: loopback, method: "POST", path: "/v3/kv/put", host: "localhost", contentType: "application/json", want: 200},
		{name: "gateway write as JSON with charset", cfg: loopback, method: "POST", path: "/v3/kv/put", host: "localhost", contentType: "application/json; charset=utf-8", want: 200},
		{name: "gateway write as text/plain (a web form)", cfg: loopback, method: "POST", path: "/v3/kv/put", host: "localhost", contentType: "text/plain", want: http.StatusUnsupportedMediaType},
		{name: "gateway write without a content type", cfg: loopback, method: "POST", path: "/v3/kv/put", host: "localhost", want: http.StatusUnsupportedMediaType},
		{name: "gateway write from a foreign page", cfg: loopback, method: "POST", path: "/v3/kv/put", host: "localhost", origin: "http://evil.example", contentType: "application/json", want: http.StatusForbidden},
		{name: "write from the server's own origin", cfg: loopback, method: "POST", path: "/v3/kv/put", host: "localhost:8080", origin: "http://localhost:8080", contentType: "application/json", want: 200},
		{name: "write from an allowed origin", cfg: Config{ListenAddr: "127.0.0.1:8080", JSONPrefix: "/v3/", CORS: []string{"https://ui.example"}}, method: "POST", path: "/v3/kv/put", host: "localhost", origin: "https://ui.example", contentType: "application/json", want: 200, wantCORS: "https://ui.example"},
		{name: "CORS *", cfg: Config{ListenAddr: "127.0.0.1:8080", JSONPrefix: "/v3/", CORS: []string{"*"}}, method: "POST", path: "/v3/kv/put", host: "localhost", origin: "https://any.example", contentType: "application/json", want: 200, wantCORS: "https://any.example"},
		{name: "a read from a foreign page gets no CORS header", cfg: loopback, method: "GET", path: "/health", host: "localhost", origin: "http://evil.example", want: 200},
		{name: "preflight", cfg: Config{ListenAddr: "127.0.0.1:8080", CORS: []string{"https://ui.example"}}, method: "OPTIONS", path: "/v3/kv/put", host: "localhost", origin: "https://ui.example", want: 200, wantCORS: "https://ui.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }), tc.cfg)
			r := httptest.NewRequest(tc.method, "http://x"+tc.path, strings.NewReader("{}"))
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d (%s)", w.Code, tc.want, w.Body)
			}
			if got := w.Header().Get("Access-Control-Allow-Origin"); got != tc.wantCORS {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tc.wantCORS)
			}
		})
	}
}
