package zab

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TCPConfig configures a TCPTransport.
type TCPConfig struct {
	ID     uint64
	Listen string // address to listen on (this member's peer address)
	// Listener, if set, is used instead of listening on Listen (which
	// should then be its address); the transport closes it. Tests bind
	// port 0 this way, so no other process can take the port between
	// choosing it and listening on it.
	Listener net.Listener
	Peers    map[uint64]string // every other member's peer address (this member's entry is ignored)
	Logger   *slog.Logger
	// DialTimeout (default 1 s) and WriteTimeout (default 5 s) bound one
	// connection attempt and one frame write; IdleTimeout (default 30 s)
	// closes an inbound connection that sends nothing (the leader's
	// heartbeats and the followers' answers keep live ones busy).
	DialTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxFrame bounds one message (default 1 GiB; a snapshot travels as one
	// message).
	MaxFrame int
	// QueueSize is the per-peer send queue (default 4096 messages); Send
	// drops when it is full.
	QueueSize int
	// TLS, if set, makes every peer connection mutual TLS and binds
	// member IDs to certificates (see PeerTLS).
	TLS *PeerTLS
}

// PeerTLS is mutual TLS between members. A member's certificate must name
// it: it carries the DNS subject alternative name PeerCertName(id), and
// chains to the peers' CA. A connection whose certificate does not name
// the member it claims to be (in its hello) or was dialed as is closed, so
// a member's key proves who it is and a peer is no longer trusted on the
// ID it claims.
type PeerTLS struct {
	// Server is the configuration inbound connections are accepted with;
	// it must require and verify client certificates.
	Server *tls.Config
	// Client returns the configuration to dial the member whose
	// certificate must hold serverName (called at each dial, so that
	// rotated certificates are used).
	Client func(serverName string) *tls.Config
	// Unauthenticated encrypts without binding IDs to certificates: no
	// certificate is checked, so any host that reaches the peer port is
	// trusted on the ID it claims, as without TLS (etcd's
	// --peer-auto-tls, self-signed certificates no one can verify).
	Unauthenticated bool
}

// PeerCertName is the name a member's peer certificate must hold as a DNS
// subject alternative name: janus-member-<id>.
func PeerCertName(id uint64) string { return peerCertPrefix + strconv.FormatUint(id, 10) }

const peerCertPrefix = "janus-member-"

// TCPTransport sends each peer's messages over one outbound TCP connection
// and receives over the connections peers open to it, so each ordered pair
// of members has one connection and messages between two members arrive
// in the order they were sent. Frames are
//
//	length uint32 | crc32c uint32 | message
//
// and a connection starts with a hello frame naming the sender. A frame
// that is too long, fails its checksum or does not decode closes that
// connection only. A broken outbound connection is redialed with jittered
// exponential backoff (50 ms to 2 s); what was queued meanwhile is sent
// then, what overflowed the queue is lost.
type TCPTransport struct {
	cfg    TCPConfig
	log    *slog.Logger
	ln     net.Listener
	recv   chan Envelope
	stopCh chan struct{}
	// peers are the members messages go to (see SetPeers); known are the
	// IDs ever among them, whose inbound connections are accepted; former
	// are the senders of those no longer among them (see sendToFormer).
	pmu    sync.RWMutex
	peers  map[uint64]*tcpPeer
	known  map[uint64]bool
	former map[uint64]*tcpPeer
	wg     sync.WaitGroup // every goroutine but the ones reading inbound connections
	rwg    sync.WaitGroup // inbound readers
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

type tcpPeer struct {
	id     uint64
	addr   string
	q      chan Message
	retire chan struct{} // closed when the peer leaves: send what is queued, then stop
	// stopped says its sender (of a peer that left) has stopped or is
	// stopping with nothing queued; guarded by TCPTransport.pmu.
	stopped bool
}

const (
	frameHeader = 8
	helloMagic  = "JZABHI1"
)

// NewTCPTransport listens on cfg.Listen and starts a sender per peer.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 1 << 30
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 4096
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("zab: listen for peers on %s: %w", cfg.Listen, err)
		}
	}
	t := &TCPTransport{
		cfg: cfg, log: cfg.Logger.With("component", "zab-transport"), ln: ln,
		recv:   make(chan Envelope, 8192),
		peers:  make(map[uint64]*tcpPeer),
		known:  make(map[uint64]bool),
		former: make(map[uint64]*tcpPeer),
		stopCh: make(chan struct{}),
		conns:  make(map[net.Conn]struct{}),
	}
	t.setPeers(cfg.Peers, false)
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
}

// Addr is the address the transport listens on.
func (t *TCPTransport) Addr() net.Addr { return t.ln.Addr() }

// SetPeers implements PeerSetter.
func (t *TCPTransport) SetPeers(peers map[uint64]string) { t.setPeers(peers, true) }

func (t *TCPTransport) setPeers(peers map[uint64]string, change bool) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	for id, p := range t.peers {
		if addr, ok := peers[id]; !ok || addr != p.addr {
			t.log.Info("peer leaves", "peer", id, "addr", p.addr)
			close(p.retire)
			delete(t.peers, id)
			t.former[id] = p
		}
	}
	for id, addr := range peers {
		if id == t.cfg.ID || t.peers[id] != nil {
			continue
		}
		p := &tcpPeer{id: id, addr: addr, q: make(chan Message, t.cfg.QueueSize), retire: make(chan struct{})}
		if !t.startSender(p) {
			return // closed
		}
		if change {
			t.log.Info("peer joins", "peer", id, "addr", addr)
		}
		t.peers[id], t.known[id] = p, true
		delete(t.former, id)
	}
}

// startSender starts p's sender unless the transport is closed (Close
// waits for every sender it started).
func (t *TCPTransport) startSender(p *tcpPeer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go t.runSender(p)
	return true
}

// knows reports whether id was ever a peer.
func (t *TCPTransport) knows(id uint64) bool {
	t.pmu.RLock()
	defer t.pmu.RUnlock()
	return t.known[id]
}

// sendToFormer sends m to a member that left the peers, through a sender
// that stops once its queue is empty. The protocol sends one only in
// answer to it (a removed member that missed the COMMIT removing it and
// now looks for a leader learns of its removal from the answers to its
// notifications), so a former member that says nothing is never dialed.
func (t *TCPTransport) sendToFormer(to uint64, m Message) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	p := t.former[to]
	if p == nil {
		return
	}
	if p.stopped {
		p = &tcpPeer{id: to, addr: p.addr, q: make(chan Message, t.cfg.QueueSize), retire: p.retire}
		if !t.startSender(p) {
			return
		}
		t.former[to] = p
	}
	select {
	case p.q <- m:
	default:
	}
}

// stopRetired marks the sender of p, a peer that left, as stopping, and
// reports whether it may: only with nothing queued unless drop, checked
// under pmu, which sendToFormer holds while it queues, so that an answer
// to a former member is never queued to a sender already on its way out
// (the next one starts a new sender instead).
func (t *TCPTransport) stopRetired(p *tcpPeer, drop bool) bool {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if !drop && len(p.q) > 0 {
		return false
	}
	p.stopped = true
	return true
}

// Send implements Transport.
func (t *TCPTransport) Send(to uint64, m Message) {
	t.pmu.RLock()
	p := t.peers[to]
	t.pmu.RUnlock()
	if p == nil {
		t.sendToFormer(to, m)
		return
	}
	select {
	case p.q <- m:
	default:
	}
}

// Receive implements Transport.
func (t *TCPTransport) Receive() <-chan Envelope { return t.recv }

// Close implements Transport.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stopCh)
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	err := t.ln.Close()
	t.wg.Wait()
	t.rwg.Wait()
	close(t.recv)
	return err
}

func (t *TCPTransport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TCPTransport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.Close()
}

func (t *TCPTransport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.stopCh:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.log.Warn("accept peer connection", "err", err)
			select {
			case <-t.stopCh:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !t.track(c) {
			continue
		}
		t.rwg.Add(1)
		go t.readConn(c)
	}
}

func (t *TCPTransport) readConn(raw net.Conn) {
	defer t.rwg.Done()
	defer t.untrack(raw)
	c := raw
	var tc *tls.Conn
	if t.cfg.TLS != nil {
		tc = tls.Server(raw, t.cfg.TLS.Server)
		c = tc
		raw.SetDeadline(time.Now().Add(t.cfg.IdleTimeout))
		if err := tc.HandshakeContext(context.Background()); err != nil {
			t.log.Warn("peer TLS handshake failed; closing connection", "remote", raw.RemoteAddr(), "err", err)
			return
		}
		raw.SetDeadline(time.Time{})
	}
	br := bufio.NewReaderSize(c, 64<<10)
	c.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout))
	hello, err := readFrame(br, 64)
	if err != nil || len(hello) < len(helloMagic) || string(hello[:len(helloMagic)]) != helloMagic {
		t.log.Warn("bad peer hello; closing connection", "remote", c.RemoteAddr(), "err", err)
		return
	}
	from, n := binary.Uvarint(hello[len(helloMagic):])
	if n <= 0 {
		return
	}
	if !t.knows(from) || from == t.cfg.ID {
		t.log.Warn("connection from an unknown member; closing", "remote", c.RemoteAddr(), "id", from)
		return
	}
	if tc != nil && !t.cfg.TLS.Unauthenticated {
		if err := certNames(tc.ConnectionState(), from); err != nil {
			t.log.Warn("peer certificate does not name the member it claims to be; closing", "remote", c.RemoteAddr(), "id", from, "err", err)
			return
		}
	}
	for {
		c.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout))
		frame, err := readFrame(br, t.cfg.MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.log.Debug("peer connection ends", "from", from, "err", err)
			}
			return
		}
		m, err := DecodeMessage(frame)
		if err != nil {
			t.log.Warn("malformed message; closing connection", "from", from, "err", err)
			return
		}
		select {
		case t.recv <- Envelope{From: from, Msg: m}:
		case <-t.stopCh:
			return
		}
	}
}

func readFrame(r io.Reader, maxLen int) ([]byte, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if int64(n) > int64(maxLen) {
		return nil, fmt.Errorf("frame of %d bytes exceeds the limit %d", n, maxLen)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	if got, want := crc32.Checksum(buf, crcTable), binary.LittleEndian.Uint32(hdr[4:]); got != want {
		return nil, fmt.Errorf("frame checksum mismatch")
	}
	return buf, nil
}

// encodeFrame appends m to dst as one frame, encoding it in place (no
// second copy of a PROPOSAL's entries per peer).
func encodeFrame(dst []byte, m *Message) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	dst = AppendMessage(dst, m)
	payload := dst[start+frameHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, crcTable))
	return dst
}

func appendFrame(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, crcTable))
	return append(dst, payload...)
}

// startConn begins an outbound connection to member id: the TLS handshake,
// if peers use TLS, then the hello. It returns what to write frames to.
func (t *TCPTransport) startConn(conn net.Conn, id uint64) (io.Writer, error) {
	var w io.Writer = conn
	if t.cfg.TLS != nil {
		tc := tls.Client(conn, t.cfg.TLS.Client(PeerCertName(id)))
		conn.SetDeadline(time.Now().Add(t.cfg.DialTimeout + t.cfg.WriteTimeout))
		if err := tc.HandshakeContext(context.Background()); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		conn.SetDeadline(time.Time{})
		// The handshake verified that the certificate holds
		// PeerCertName(id); certNames also refuses one naming others.
		if !t.cfg.TLS.Unauthenticated {
			if err := certNames(tc.ConnectionState(), id); err != nil {
				return nil, err
			}
		}
		w = tc
	}
	hello := binary.AppendUvarint([]byte(helloMagic), t.cfg.ID)
	conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	_, err := w.Write(appendFrame(nil, hello))
	return w, err
}

// certNames checks that a verified peer certificate names member id, and
// no other member: a certificate for two members would let either act as
// the other.
func certNames(st tls.ConnectionState, id uint64) error {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return errors.New("no verified peer certificate")
	}
	leaf := st.PeerCertificates[0]
	want := PeerCertName(id)
	for _, n := range leaf.DNSNames {
		if strings.HasPrefix(n, peerCertPrefix) && n != want {
			return fmt.Errorf("the certificate also names %s", n)
		}
	}
	return leaf.VerifyHostname(want)
}

// runSender owns the outbound connection to one peer.
func (t *TCPTransport) runSender(p *tcpPeer) {
	defer t.wg.Done()
	backoff := 50 * time.Millisecond
	var c net.Conn
	var bw *bufio.Writer
	defer func() {
		if c != nil {
			t.untrack(c)
		}
	}()
	var buf []byte
	for {
		var m Message
		select {
		case <-t.stopCh:
			return
		case m = <-p.q:
		case <-p.retire:
			select {
			case m = <-p.q:
			default:
				if t.stopRetired(p, false) {
					return // everything queued before it left is sent
				}
				continue // an answer was queued meanwhile
			}
		}
		for c == nil {
			d := net.Dialer{Timeout: t.cfg.DialTimeout}
			conn, err := d.Dial("tcp", p.addr)
			if err == nil {
				if !t.track(conn) {
					return
				}
				var w io.Writer
				if w, err = t.startConn(conn, p.id); err == nil {
					c, bw = conn, bufio.NewWriterSize(w, 64<<10)
					backoff = 50 * time.Millisecond
					break
				}
				t.untrack(conn)
			}
			t.log.Debug("dial peer", "peer", p.id, "addr", p.addr, "err", err)
			select {
			case <-p.retire:
				t.stopRetired(p, true)
				return // it left and cannot be reached: what is queued is lost, as for any peer down
			default:
			}
			wait := backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, 2*time.Second)
			select {
			case <-t.stopCh:
				return
			case <-time.After(wait):
			}
		}
		// Write m and whatever else is queued, then flush once.
		c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		var err error
		for {
			buf = encodeFrame(buf[:0], &m)
			if _, err = bw.Write(buf); err != nil {
				break
			}
			select {
			case m = <-p.q:
				continue
			default:
			}
			break
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			t.log.Debug("peer connection broken", "peer", p.id, "err", err)
			t.untrack(c)
			c, bw = nil, nil
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}
