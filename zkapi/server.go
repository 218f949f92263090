package zkapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/accept"
)

// Server serves the ZooKeeper client protocol on a core.Backend.
type Server struct {
	backend core.Backend
	cfg     Config
	log     *slog.Logger
	watches *watchManager
	started time.Time
	stats   serverStats
	digest  treeDigest // the hash four-letter word's history
	// configSeen is the version of the last configuration the face
	// showed or saw commit; watches.mu guards it (see noteConfigLocked).
	configSeen uint64

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	ready  chan struct{} // closed once the event stream is followed
	wg     sync.WaitGroup

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	sessions  map[int64]*conn // each session's current connection
	closed    bool
	rejected  rateLog // connections refused by the limits

	// afterQueue, if set, is called by a connection's reader after it
	// queues each request. Only tests set it.
	afterQueue func(*conn)
}

// New returns a Server on b. It starts following b's event stream at once;
// Serve accepts clients at once, but starts sessions only once that stream
// is running, so that no watch misses an event. Without a leader that can
// take a while: four-letter words are answered meanwhile (see
// awaitReady), as ZooKeeper answers them out of quorum.
func New(b core.Backend, cfg Config) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		backend: b, cfg: cfg, log: cfg.Logger, watches: newWatchManager(), started: time.Now(),
		ctx: ctx, cancel: cancel, ready: make(chan struct{}),
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}, sessions: map[int64]*conn{},
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.followEvents()
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.followConfig()
	}()
	return s
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("zkapi: server closed")

// Serve accepts connections on l until Close; it always returns an error.
// Temporary accept errors (out of file descriptors, say) do not end it:
// it backs off and accepts again once they pass.
func (s *Server) Serve(ln net.Listener) error {
	l := accept.Patient(ln, s.log)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			return fmt.Errorf("zkapi: accept: %w", err)
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed || !s.admit(c) {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.run()
		}()
	}
}

// admit applies the connection limits, as ZooKeeper's accept thread does:
// the total (maxCnxns) and the per-IP (maxClientCnxns) one. A connection
// over either is closed at once, before it is read. s.mu is held.
func (s *Server) admit(c *conn) bool {
	if s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns {
		s.rejected.log(s.log, "too many connections; closing a new one", "remote", c.remote, "max_cnxns", s.cfg.MaxConns)
		return false
	}
	if s.cfg.MaxClientConns <= 0 {
		return true
	}
	n := 0
	for o := range s.conns {
		if o.remote == c.remote {
			n++
		}
	}
	if n >= s.cfg.MaxClientConns {
		s.rejected.log(s.log, "too many connections from one address; closing a new one", "remote", c.remote, "max_client_cnxns", s.cfg.MaxClientConns)
		return false
	}
	return true
}

// rateLog logs a message at most once a second, counting the ones it
// holds back, as ZooKeeper's RateLogger does for refused connections: a
// client retrying in a loop must not flood the log.
type rateLog struct {
	last    time.Time
	dropped int
}

// log writes msg unless one was written less than a second ago. Its
// caller serializes the calls (s.mu for the admission log).
func (r *rateLog) log(l *slog.Logger, msg string, args ...any) {
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < time.Second {
		r.dropped++
		return
	}
	if r.dropped > 0 {
		args = append(args, "not_logged_since_last", r.dropped)
	}
	l.Warn(msg, args...)
	r.last, r.dropped = now, 0
}

// Close stops accepting, closes every connection (sessions live on until
// they expire) and waits for the server's goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		_ = l.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
}

// attach makes c its session's connection, closing the one it replaces.
func (s *Server) attach(c *conn) {
	id := c.sessionID()
	s.mu.Lock()
	old := s.sessions[id]
	s.sessions[id] = c
	s.mu.Unlock()
	if old != nil && old != c {
		old.close()
	}
}

// forget drops a closed connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if id := c.sessionID(); id != 0 && s.sessions[id] == c {
		delete(s.sessions, id)
	}
}

// connections returns the open connections, for the status commands.
func (s *Server) connections() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// followEvents owns the server's one hub subscription and feeds the watch
// manager until Close. If the stream breaks it starts again from the latest
// revision, logging the gap.
func (s *Server) followEvents() {
	backoff := 10 * time.Millisecond
	corrupt := false
	for s.ctx.Err() == nil {
		err := s.followOnce()
		if s.ctx.Err() != nil {
			return
		}
		switch {
		case errors.Is(err, core.ErrCorrupt):
			// The member refuses to serve from a damaged state until its
			// alarm is cleared. Accept connections meanwhile, so that
			// four-letter words and admin commands answer (sessions are
			// refused), and keep trying quietly.
			s.markReady()
			if !corrupt {
				s.log.Warn("member is corrupt: serving no sessions until its alarm is cleared", "err", err)
			}
			corrupt = true
		case errors.Is(err, core.ErrHubClosed):
			// The member's state was replaced by a snapshot from the
			// leader: the events between the old state and the new one
			// will never be delivered. As a ZooKeeper follower that
			// resynchronizes drops its clients, close every connection:
			// each client reconnects with its session and re-sets its
			// watches (SetWatches with its last zxid), which fires those
			// whose nodes changed meanwhile.
			corrupt = false
			conns := s.connections()
			s.log.Info("state replaced by a snapshot; closing client connections so that they re-set their watches", "connections", len(conns))
			for _, c := range conns {
				c.close()
			}
		case errors.Is(err, core.ErrNoLeader) || errors.Is(err, core.ErrLeaderChanged):
			// An ensemble between leaders: an ordinary state the loop
			// waits out, not a failure.
			corrupt = false
			s.log.Info("watch event stream waits for a leader", "err", err)
		default:
			corrupt = false
			s.log.Error("watch event stream ended; resubscribing", "err", err)
		}
		select {
		case <-time.After(backoff):
		case <-s.ctx.Done():
			return
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (s *Server) followOnce() error {
	v, err := s.backend.Read(s.ctx, 0)
	if err != nil {
		return fmt.Errorf("read latest revision: %w", err)
	}
	rev := v.Rev()
	// The digest costs a walk of the whole tree before the face serves,
	// and a hash per event: only a member that answers hash keeps one.
	digesting := s.allowed("hash")
	if digesting {
		err = s.digest.reset(v, rev)
	}
	v.Close()
	if err != nil {
		return err
	}
	sub, err := s.backend.Watch(rev + 1)
	if err != nil {
		return fmt.Errorf("subscribe from revision %d: %w", rev+1, err)
	}
	defer sub.Close()
	s.watches.start(rev)
	s.markReady()
	for {
		select {
		case re, ok := <-sub.Events():
			if !ok {
				return fmt.Errorf("subscription closed: %w", sub.Err())
			}
			if digesting {
				s.digest.apply(re)
			}
			s.watches.dispatch(re, s.aclAt(re))
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

// markReady lets Serve accept connections. Only followEvents calls it.
func (s *Server) markReady() {
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

// aclAt returns a lookup of node ACLs as of revision re.Rev, for filtering
// NodeChildrenChanged by the parent's ACL. A parent deleted later in the
// same transaction had the ACL its delete event shows. If re.Rev is no
// longer readable it reads the latest state: ACL changes fire no watches,
// so that can only differ after a later setACL.
func (s *Server) aclAt(re core.RevEvents) aclLookup {
	seen := map[string][]core.ACL{} // a multi may touch one parent often
	return func(path string) []core.ACL {
		if acl, ok := seen[path]; ok {
			return acl
		}
		acl := s.readACL(re, path)
		seen[path] = acl
		return acl
	}
}

func (s *Server) readACL(re core.RevEvents, path string) []core.ACL {
	for _, ev := range re.Events {
		if ev.Type == core.EventDelete && ev.Prev != nil && string(ev.Prev.Key) == path {
			return ev.Prev.ACL
		}
	}
	v, err := s.backend.Read(s.ctx, re.Rev)
	if err != nil {
		if v, err = s.backend.Read(s.ctx, 0); err != nil {
			s.log.Warn("reading a parent's ACL for a child watch", "path", path, "err", err)
			return nil
		}
	}
	defer v.Close()
	n, _, err := core.TreeNode(v, []byte(path))
	if err != nil || n == nil {
		return nil
	}
	return n.ACL
}

// SessionAddrs maps each session connected to this server to its client's
// address. Other members' sessions are not listed: each member knows only
// its own connections. The web console shows it next to the lease.
func (s *Server) SessionAddrs() map[int64]string {
	out := map[int64]string{}
	for _, c := range s.connections() {
		if ss := c.session.Load(); ss != nil {
			out[ss.id] = c.nc.RemoteAddr().String()
		}
	}
	return out
}
