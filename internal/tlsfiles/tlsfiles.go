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
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Files names one side's PEM files, as etcd's --cert-file, --key-file,
// --trusted-ca-file and --client-crl-file do.
type Files struct {
	Cert, Key string
	// CA is the bundle that client certificates (on a server) or server
	// certificates (on a client) must chain to; empty on a server means
	// clients are not asked for certificates, and on a client the system's
	// roots.
	CA string
	// CRL is a certificate revocation list (PEM or DER, as etcd reads
	// it): a handshake whose other side presents a certificate it lists
	// is refused.
	CRL string
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
	// MinVersion and MaxVersion bound the protocol versions (etcd's
	// --tls-min-version and --tls-max-version, see ParseVersion): 0 means
	// TLS 1.2 and Go's newest.
	MinVersion, MaxVersion uint16
	// SelfSigned marks a certificate generated at start (etcd's
	// --auto-tls, see SelfCert): a client dialing with it does not verify
	// the server's, as an etcd client of an auto-TLS server does not.
	SelfSigned bool
}

// Source holds the current certificate and CA pool read from Files.
type Source struct {
	files Files
	opts  Options
	log   *slog.Logger

	mu      sync.Mutex
	stamp   [4]fileStamp
	cert    *tls.Certificate
	pool    *x509.CertPool
	revoked map[string]bool // serial numbers the CRL lists, as bytes
	failed  string          // the last load error logged, so a broken file is logged once
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

func sameStamps(a, b [4]fileStamp) bool {
	return a[0].same(b[0]) && a[1].same(b[1]) && a[2].same(b[2]) && a[3].same(b[3])
}

// MinVersion is the oldest protocol version accepted on every port.
const MinVersion = tls.VersionTLS12

// ParseVersion reads etcd's --tls-min-version and --tls-max-version
// values: TLS1.2 or TLS1.3; empty gives 0 (the default).
func ParseVersion(s string) (uint16, error) {
	switch s {
	case "":
		return 0, nil
	case "TLS1.2":
		return tls.VersionTLS12, nil
	case "TLS1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("unexpected TLS version %q (must be one of: TLS1.2, TLS1.3)", s)
}

// CheckVersions refuses the combinations etcd refuses: a minimum above
// the maximum, and cipher suites with TLS 1.3 only (whose suites Go does
// not let be chosen).
func CheckVersions(minV, maxV uint16, ciphers []uint16) error {
	if maxV != 0 && minV > maxV {
		return fmt.Errorf("min version (%s) is greater than max version (%s)", versionName(minV), versionName(maxV))
	}
	if minV == tls.VersionTLS13 && len(ciphers) > 0 {
		return errors.New("cipher suites cannot be configured when only TLS1.3 is enabled")
	}
	return nil
}

func versionName(v uint16) string {
	switch v {
	case tls.VersionTLS12:
		return "TLS1.2"
	case tls.VersionTLS13:
		return "TLS1.3"
	}
	return tls.VersionName(v)
}

func (o Options) minVersion() uint16 { return max(o.MinVersion, MinVersion) }

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
	if err := CheckVersions(opts.MinVersion, opts.MaxVersion, opts.CipherSuites); err != nil {
		return nil, fmt.Errorf("tlsfiles: %w", err)
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

func (s *Source) stat() ([4]fileStamp, error) {
	var st [4]fileStamp
	for i, name := range []string{s.files.Cert, s.files.Key, s.files.CA, s.files.CRL} {
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
func (s *Source) load(stamp [4]fileStamp) error {
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
	var revoked map[string]bool
	if s.files.CRL != "" {
		if revoked, err = readCRL(s.files.CRL); err != nil {
			return err
		}
	}
	s.cert, s.pool, s.revoked, s.stamp = &cert, pool, revoked, stamp
	return nil
}

// readCRL returns the serial numbers a revocation list names. etcd reads
// DER; a PEM "X509 CRL" block is taken too.
func readCRL(name string) (map[string]bool, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: CRL: %w", err)
	}
	if block, _ := pem.Decode(b); block != nil {
		b = block.Bytes
	}
	list, err := x509.ParseRevocationList(b)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: CRL file %s: %w", name, err)
	}
	revoked := map[string]bool{}
	for _, e := range list.RevokedCertificateEntries {
		revoked[string(e.SerialNumber.Bytes())] = true
	}
	return revoked, nil
}

// revocationCheck returns a VerifyConnection hook refusing a handshake
// whose other side presented a certificate revoked lists, as etcd's
// checkCRL does (every certificate of the chain presented); nil without
// a CRL.
func revocationCheck(revoked map[string]bool) func(tls.ConnectionState) error {
	if revoked == nil {
		return nil
	}
	return func(cs tls.ConnectionState) error {
		for _, c := range cs.PeerCertificates {
			if revoked[string(c.SerialNumber.Bytes())] {
				return fmt.Errorf("tlsfiles: certificate serial %x revoked", c.SerialNumber.Bytes())
			}
		}
		return nil
	}
}

// current returns the certificate, pool and revoked serials, reloading
// them first if a file changed since they were read.
func (s *Source) current() (*tls.Certificate, *x509.CertPool, map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamp, err := s.stat()
	if err == nil && sameStamps(stamp, s.stamp) {
		return s.cert, s.pool, s.revoked
	}
	if err == nil {
		if err = s.load(stamp); err == nil {
			s.failed = ""
			s.log.Info("TLS certificate reloaded", "cert", s.files.Cert, "ca", s.files.CA, "crl", s.files.CRL)
			return s.cert, s.pool, s.revoked
		}
	}
	if msg := err.Error(); msg != s.failed {
		s.failed = msg
		s.log.Warn("TLS files changed but do not load; keeping the previous ones", "err", err)
	}
	return s.cert, s.pool, s.revoked
}

// ServerConfig returns a server configuration that picks up changed files
// at each handshake, offering the ALPN protocols nextProtos (gRPC needs
// "h2").
func (s *Source) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: s.opts.minVersion(),
		MaxVersion: s.opts.MaxVersion,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool, revoked := s.current()
			c := &tls.Config{
				MinVersion:       s.opts.minVersion(),
				MaxVersion:       s.opts.MaxVersion,
				CipherSuites:     s.opts.CipherSuites,
				NextProtos:       nextProtos,
				Certificates:     []tls.Certificate{*cert},
				ClientCAs:        pool,
				VerifyConnection: revocationCheck(revoked),
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
//
// With a CRL, a server presenting a certificate it lists is refused; a
// self-signed (auto TLS) source does not verify the server at all, as
// etcd's clients of an auto-TLS member do not.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	cert, pool, revoked := s.current()
	c := &tls.Config{
		MinVersion:         s.opts.minVersion(),
		MaxVersion:         s.opts.MaxVersion,
		CipherSuites:       s.opts.CipherSuites,
		ServerName:         serverName,
		RootCAs:            pool,
		Certificates:       []tls.Certificate{*cert},
		InsecureSkipVerify: s.opts.SelfSigned,
		VerifyConnection:   revocationCheck(revoked),
	}
	return c
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
