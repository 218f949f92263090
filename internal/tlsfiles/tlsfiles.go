// Package tlsfiles builds TLS configurations from PEM files that may be
// replaced while the server runs: a certificate rotation is the operator
// writing new files, and the next handshake uses them, with no restart.
//
// Each handshake stats the files (cheap next to the handshake itself) and
// reloads them when a modification time or size changed. A pair that does
// not load (a key written after its certificate, a half-written file) is
// logged once and the previous one kept: a rotation in progress must never
// turn into refused connections. Connections already open keep the
// certificate they were made with.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Files names one side's PEM files, as etcd's --cert-file, --key-file and
// --trusted-ca-file do.
type Files struct {
	Cert, Key string
	// CA is the bundle that client certificates (on a server) or server
	// certificates (on a client) must chain to; empty on a server means
	// clients are not asked for certificates, and on a client the system's
	// roots.
	CA string
}

// Enabled reports whether a certificate is configured.
func (f Files) Enabled() bool { return f.Cert != "" }

// Options are the parts of a configuration that do not come from files.
type Options struct {
	// ClientCertAuth requires every client to present a certificate that
	// chains to CA (etcd's --client-cert-auth).
	ClientCertAuth bool
	// CipherSuites restricts TLS 1.2 to these suites (IDs from
	// ParseCipherSuites); nil keeps Go's defaults. TLS 1.3 suites are not
	// configurable, as in Go and etcd.
	CipherSuites []uint16
}

// Source holds the current certificate and CA pool read from Files.
type Source struct {
	files Files
	opts  Options
	log   *slog.Logger

	mu     sync.Mutex
	stamp  [3]fileStamp
	cert   *tls.Certificate
	pool   *x509.CertPool
	failed string // the last load error logged, so a broken file is logged once
}

// fileStamp identifies one version of a file: a rename over it (the
// atomic way to replace one) changes the file itself, an edit in place its
// time or size.
type fileStamp struct {
	fi   os.FileInfo
	mod  time.Time
	size int64
}

func (a fileStamp) same(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == b.fi
	}
	return os.SameFile(a.fi, b.fi) && a.mod.Equal(b.mod) && a.size == b.size
}

func sameStamps(a, b [3]fileStamp) bool {
	return a[0].same(b[0]) && a[1].same(b[1]) && a[2].same(b[2])
}

// MinVersion is the oldest protocol version accepted on every port.
const MinVersion = tls.VersionTLS12

// New loads files; it fails if they do not load now, so a typo in a flag
// stops the server at start rather than at the first client.
func New(files Files, opts Options, log *slog.Logger) (*Source, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("tlsfiles: a certificate needs both a cert file and a key file")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.ClientCertAuth && files.CA == "" {
		return nil, errors.New("tlsfiles: client certificate authentication needs a trusted CA file")
	}
	s := &Source{files: files, opts: opts, log: log}
	stamp, err := s.stat()
	if err != nil {
		return nil, err
	}
	if err := s.load(stamp); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Source) stat() ([3]fileStamp, error) {
	var st [3]fileStamp
	for i, name := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return st, fmt.Errorf("tlsfiles: %w", err)
		}
		st[i] = fileStamp{fi, fi.ModTime(), fi.Size()}
	}
	return st, nil
}

// load reads the files into s. s.mu is held or s is not yet shared.
func (s *Source) load(stamp [3]fileStamp) error {
	cert, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return fmt.Errorf("tlsfiles: certificate %s and key %s: %w", s.files.Cert, s.files.Key, err)
	}
	var pool *x509.CertPool
	if s.files.CA != "" {
		pem, err := os.ReadFile(s.files.CA)
		if err != nil {
			return fmt.Errorf("tlsfiles: trusted CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tlsfiles: trusted CA file %s holds no PEM certificate", s.files.CA)
		}
	}
	s.cert, s.pool, s.stamp = &cert, pool, stamp
	return nil
}

// current returns the certificate and pool, reloading them first if a file
// changed since they were read.
func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamp, err := s.stat()
	if err == nil && sameStamps(stamp, s.stamp) {
		return s.cert, s.pool
	}
	if err == nil {
		if err = s.load(stamp); err == nil {
			s.failed = ""
			s.log.Info("TLS certificate reloaded", "cert", s.files.Cert, "ca", s.files.CA)
			return s.cert, s.pool
		}
	}
	if msg := err.Error(); msg != s.failed {
		s.failed = msg
		s.log.Warn("TLS files changed but do not load; keeping the previous ones", "err", err)
	}
	return s.cert, s.pool
}

// ServerConfig returns a server configuration that picks up changed files
// at each handshake, offering the ALPN protocols nextProtos (gRPC needs
// "h2").
func (s *Source) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			c := &tls.Config{
				MinVersion:   MinVersion,
				CipherSuites: s.opts.CipherSuites,
				NextProtos:   nextProtos,
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
			}
			switch {
			case s.opts.ClientCertAuth:
				c.ClientAuth = tls.RequireAndVerifyClientCert
			case pool != nil:
				// A CA without --client-cert-auth: a client may present
				// a certificate (an identity), which must then verify.
				c.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return c, nil
		},
	}
}

// ClientConfig returns a configuration for dialing serverName, built from
// the files as they are now: this side's certificate and the CA pool the
// server's certificate must chain to.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	cert, pool := s.current()
	return &tls.Config{
		MinVersion:   MinVersion,
		CipherSuites: s.opts.CipherSuites,
		ServerName:   serverName,
		RootCAs:      pool,
		Certificates: []tls.Certificate{*cert},
	}
}

// ParseCipherSuites turns etcd's --cipher-suites list (Go's names, as
// tls.CipherSuiteName gives them, comma separated) into suite IDs. Only
// suites Go considers secure are accepted; empty gives nil (Go's defaults).
func ParseCipherSuites(list string) ([]uint16, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var ids []uint16
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(tls.CipherSuites(), func(c *tls.CipherSuite) bool { return c.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown or insecure cipher suite %q", name)
		}
		ids = append(ids, tls.CipherSuites()[i].ID)
	}
	return ids, nil
}
