package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// SelfCertValidity is how long a generated certificate is valid, etcd's
// default --self-signed-cert-validity (one year).
const SelfCertValidity = 365 * 24 * time.Hour

// SelfCert returns the files of a self-signed certificate for hosts (the
// host parts of listen addresses: IPs become IP SANs, names DNS SANs) in
// dir, as etcd's --auto-tls keeps one under <data-dir>/fixtures/client:
// made on first start, then the same one at every restart. It proves
// nothing about the server to a client (no one can verify it): it only
// encrypts, as etcd's does.
func SelfCert(dir string, hosts []string, log *slog.Logger) (Files, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	_, errCert := os.Stat(f.Cert)
	_, errKey := os.Stat(f.Key)
	if errCert == nil && errKey == nil {
		return f, nil
	}
	if !errors.Is(errCert, os.ErrNotExist) && errCert != nil || !errors.Is(errKey, os.ErrNotExist) && errKey != nil {
		return Files{}, fmt.Errorf("tlsfiles: self-signed certificate in %s: %w", dir, errors.Join(errCert, errKey))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("tlsfiles: self-signed certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return Files{}, fmt.Errorf("tlsfiles: serial: %w", err)
	}
	now := time.Now()
	tmpl := x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"janus"}},
		NotBefore:             now,
		NotAfter:              now.Add(SelfCertValidity),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, fmt.Errorf("tlsfiles: key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		return Files{}, fmt.Errorf("tlsfiles: self-signed certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Files{}, fmt.Errorf("tlsfiles: key: %w", err)
	}
	// The key first: a crash between the two leaves no certificate, and
	// the next start makes both again.
	if err := writeAtomic(f.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})); err != nil {
		return Files{}, err
	}
	if err := writeAtomic(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return Files{}, err
	}
	log.Warn("generated a self-signed certificate: it encrypts but proves nothing to clients", "cert", f.Cert, "not_after", tmpl.NotAfter)
	return f, nil
}

// writeAtomic replaces name with data: written aside, synced, renamed.
func writeAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("tlsfiles: %w", err)
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tlsfiles: write %s: %w", name, err)
	}
	return nil
}
