package etcdapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// serveSplit serves gRPC and HTTP/1.x on one listener, as etcd serves
// /metrics and /health on its client port: each connection's first bytes
// say which it is. gRPC speaks HTTP/2 from its first byte (the client
// preface starts "PRI"); anything else is handed to the HTTP handler. Over
// TLS, the negotiated ALPN protocol says it instead (see route).
func (s *Server) serveSplit(l net.Listener) error {
	grpcL := newChanListener(l)
	httpL := newChanListener(l)
	hs := &http.Server{
		Handler:           s.cfg.HTTPHandler,
		ReadHeaderTimeout: sniffTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	s.httpServers = append(s.httpServers, hs)
	s.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	grpcErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		grpcErr <- s.grpc.Serve(grpcL)
	}()
	go func() {
		defer wg.Done()
		_ = hs.Serve(httpL) // ends when httpL closes
	}()
	defer func() {
		grpcL.Close()
		httpL.Close()
		hs.Close()
		wg.Wait()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			select {
			case err := <-grpcErr:
				if err != nil && !errors.Is(err, net.ErrClosed) {
					return fmt.Errorf("etcdapi: serve %s: %w", l.Addr(), err)
				}
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("etcdapi: serve %s: %w", l.Addr(), err)
		}
		go s.route(c, grpcL, httpL)
	}
}

// sniffTimeout bounds how long a new connection may stay silent before it
// is closed: both gRPC and HTTP clients speak first.
const sniffTimeout = 10 * time.Second

// route reads the start of c and hands it to the gRPC or the HTTP side. A
// TLS connection is routed by the protocol its handshake negotiated (ALPN):
// h2 is gRPC, anything else HTTP/1.1; it goes on as the *tls.Conn it is, so
// that gRPC still sees the client's certificate.
func (s *Server) route(c net.Conn, grpcL, httpL *chanListener) {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	if tc, ok := c.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(context.Background(), sniffTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.log.Debug("TLS handshake failed", "remote", c.RemoteAddr(), "err", err)
			c.Close()
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			grpcL.deliver(c)
		} else {
			httpL.deliver(c)
		}
		return
	}
	br := bufio.NewReaderSize(c, 64)
	head, err := br.Peek(3)
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &peekedConn{Conn: c, r: br}
	if string(head) == "PRI" { // HTTP/2's client preface
		grpcL.deliver(pc)
		return
	}
	httpL.deliver(pc)
}

// peekedConn is a connection whose first bytes were read ahead.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener fed connections by serveSplit. Closing it
// closes the listener it splits, so that grpc.Server.Stop, which closes
// the listeners it serves, ends serveSplit's accept loop too.
type chanListener struct {
	parent net.Listener
	conns  chan net.Conn
	once   sync.Once
	done   chan struct{}
}

func newChanListener(parent net.Listener) *chanListener {
	return &chanListener{parent: parent, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.parent.Close()
	})
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.parent.Addr() }
