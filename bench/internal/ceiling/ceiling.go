// Package ceiling serves the etcd v3 and ZooKeeper wire protocols without
// doing any of the work behind them: every request is answered at once with
// a fixed successful reply. Run in a process of its own beside the systems
// under test, it measures what the machine, the client libraries and the
// wire cost by themselves, so a report can say how close a real server
// gets to that ceiling.
//
// The etcd ceiling is a grpc-go server implementing etcdserverpb.KV with
// stream workers (as Janus's etcd face and etcd itself can); the ZooKeeper
// ceiling reads jute frames with one goroutine per connection and writes
// the replies of every request it has already read in one flush. Reads
// return a value of the configured size, so a read's reply is as large on
// the ceiling as on a real server.
package ceiling

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"

	"github.com/januskv/janus/zkapi/jute"
)

// Config says where the ceilings listen and how large a read's value is.
type Config struct {
	// EtcdListen and ZKListen are host:port addresses; an empty one
	// leaves that wire out.
	EtcdListen, ZKListen string
	// ValueSize is the length of the value every read returns.
	ValueSize int
	Logger    *slog.Logger
}

// Server is a running pair of ceilings.
type Server struct {
	grpc   *grpc.Server
	zk     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	value  []byte
	logger *slog.Logger

	// EtcdAddr and ZKAddr are the addresses actually bound (useful
	// with port 0).
	EtcdAddr, ZKAddr string
}

// Start binds the listeners in cfg and serves until Close.
func Start(cfg Config) (*Server, error) {
	s := &Server{conns: map[net.Conn]struct{}{}, value: make([]byte, cfg.ValueSize), logger: cfg.Logger}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	for i := range s.value {
		s.value[i] = 'v'
	}
	if cfg.EtcdListen != "" {
		l, err := net.Listen("tcp", cfg.EtcdListen)
		if err != nil {
			return nil, fmt.Errorf("etcd ceiling: %w", err)
		}
		s.EtcdAddr = l.Addr().String()
		// Stream workers serve calls on a fixed set of goroutines
		// instead of one new goroutine per call, the cheapest way
		// grpc-go offers.
		s.grpc = grpc.NewServer(grpc.NumStreamWorkers(uint32(runtime.NumCPU())))
		pb.RegisterKVServer(s.grpc, &kv{value: s.value})
		s.wg.Go(func() {
			if err := s.grpc.Serve(l); err != nil {
				s.logger.Error("etcd ceiling stopped", "err", err)
			}
		})
	}
	if cfg.ZKListen != "" {
		l, err := net.Listen("tcp", cfg.ZKListen)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("ZooKeeper ceiling: %w", err)
		}
		s.zk, s.ZKAddr = l, l.Addr().String()
		s.wg.Go(s.acceptZK)
	}
	return s, nil
}

// Close stops both ceilings, closes every connection and waits for their
// goroutines.
func (s *Server) Close() {
	if s.grpc != nil {
		s.grpc.Stop()
	}
	s.mu.Lock()
	s.closed = true
	if s.zk != nil {
		s.zk.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// header is the one response header every etcd reply carries.
var header = &pb.ResponseHeader{ClusterId: 1, MemberId: 1, Revision: 1, RaftTerm: 1}

// kv answers etcd's KV service at once.
type kv struct {
	pb.UnimplementedKVServer
	value []byte
}

func (k *kv) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{Header: header, Count: 1, Kvs: []*mvccpb.KeyValue{{
		Key: r.Key, Value: k.value, CreateRevision: 1, ModRevision: 1, Version: 1,
	}}}, nil
}

func (k *kv) Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error) {
	return &pb.PutResponse{Header: header}, nil
}

func (k *kv) DeleteRange(context.Context, *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return &pb.DeleteRangeResponse{Header: header}, nil
}

func (k *kv) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp := &pb.TxnResponse{Header: header, Succeeded: true}
	for _, op := range r.Success {
		switch {
		case op.GetRequestPut() != nil:
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: header}}})
		case op.GetRequestRange() != nil:
			rr, _ := k.Range(context.Background(), op.GetRequestRange())
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}})
		case op.GetRequestDeleteRange() != nil:
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{Header: header}}})
		}
	}
	return resp, nil
}

func (k *kv) Compact(context.Context, *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return &pb.CompactionResponse{Header: header}, nil
}

func (s *Server) acceptZK() {
	var sessions int64
	for {
		c, err := s.zk.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if !closed {
				s.logger.Error("ZooKeeper ceiling stopped accepting", "err", err)
			}
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		sessions++
		id := sessions
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			if err := s.serveZK(c, id); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.logger.Debug("ZooKeeper ceiling connection ended", "err", err)
			}
		})
	}
}

// fixedStat is the Stat every ZooKeeper reply carries.
var fixedStat = jute.Stat{Czxid: 1, Mzxid: 1, Ctime: 1, Mtime: 1, Pzxid: 1}

// serveZK answers one connection: the handshake, then every request with
// a fixed OK reply. Replies collect in the write buffer while more
// requests are already buffered, and go out in one write when the reader
// would wait.
func (s *Server) serveZK(c net.Conn, session int64) error {
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	body, err := jute.ReadFrame(r, jute.DefaultMaxBuffer)
	if err != nil {
		return err
	}
	var creq jute.ConnectRequest
	if err := jute.Unmarshal(body, &creq); err != nil {
		return fmt.Errorf("connect request: %w", err)
	}
	e := jute.NewEncoder(make([]byte, 0, 64<<10))
	start := e.BeginFrame()
	cresp := jute.ConnectResponse{TimeOut: creq.TimeOut, SessionID: session, Passwd: make([]byte, 16), HasReadOnly: creq.HasReadOnly}
	cresp.Encode(e)
	e.EndFrame(start)
	if _, err := w.Write(e.Bytes()); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	d := jute.NewDecoder(nil)
	for {
		body, err := jute.ReadFrame(r, jute.DefaultMaxBuffer)
		if err != nil {
			return err
		}
		d.Reset(body)
		var h jute.RequestHeader
		h.Decode(d)
		if d.Err() != nil {
			return fmt.Errorf("request header: %w", d.Err())
		}
		e.Reset(e.Bytes()[:0])
		start := e.BeginFrame()
		(&jute.ReplyHeader{Xid: h.Xid, Zxid: 1, Err: jute.CodeOk}).Encode(e)
		switch h.Type {
		case jute.OpCreate, jute.OpCreate2:
			var req jute.CreateRequest
			req.Decode(d)
			if h.Type == jute.OpCreate {
				(&jute.CreateResponse{Path: req.Path}).Encode(e)
			} else {
				(&jute.Create2Response{Path: req.Path, Stat: fixedStat}).Encode(e)
			}
		case jute.OpSetData:
			(&jute.SetDataResponse{Stat: fixedStat}).Encode(e)
		case jute.OpExists:
			(&jute.ExistsResponse{Stat: fixedStat}).Encode(e)
		case jute.OpGetData:
			st := fixedStat
			st.DataLength = int32(len(s.value))
			(&jute.GetDataResponse{Data: s.value, Stat: st}).Encode(e)
		}
		// Every other opcode (ping, closeSession, delete, ...) is
		// answered with the header alone, which is what ZooKeeper
		// sends for those that have no response record.
		e.EndFrame(start)
		if _, err := w.Write(e.Bytes()); err != nil {
			return err
		}
		if h.Type == jute.OpCloseSession {
			return w.Flush()
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}
