package zkapi

import (
	"net/http"
	"strings"
)

// While etcd authentication is enabled, the four-letter words and admin
// commands that name sessions, client addresses, or watched or ephemeral
// paths (or reset statistics) are root's alone: they would show an
// unauthenticated client what the permission model hides (README,
// "Security"). The others (ruok, isro, srvr, mntr, conf, envi, wchs,
// dirs, hash) give counts and settings only and stay open, as
// ZooKeeper's.
var (
	restrictedWords = map[string]bool{"stat": true, "cons": true, "wchc": true, "wchp": true, "dump": true, "crst": true, "srst": true}
	// restrictedCommands are the admin commands (by their long names)
	// that answer what a restricted word does.
	restrictedCommands = map[string]bool{"stats": true, "connections": true, "dump": true}
)

// restricted reports whether etcd auth is on, which closes the
// restricted commands to whoever cannot show root's credentials.
func (s *Server) restricted() bool { return s.backend.Auth().Enabled }

// wordRefusal is a restricted four-letter word's answer while etcd auth
// is on: a four-letter word cannot carry credentials, so it points to the
// admin command, which can.
func wordRefusal(cmd string) string {
	if _, ok := adminAliases[cmd]; ok {
		return cmd + " is not executed because etcd authentication is enabled: ask the HTTP port's /commands/" + cmd + " with an etcd root token.\n"
	}
	return cmd + " is not executed because etcd authentication is enabled.\n"
}

// rootRequest reports whether an admin request carries an etcd token of
// a root user, in the Authorization header as etcd's JSON gateway takes
// it (a bare token or "Bearer <token>").
func (s *Server) rootRequest(r *http.Request) bool {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return token != "" && s.cfg.RootToken != nil && s.cfg.RootToken(token)
}
