package zkapi

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/januskv/janus/zkapi/jute"
)

// latency tracks request latencies as ZooKeeper's AvgMinMaxCounter does,
// from the moment a request is read until its reply is queued.
type latency struct {
	mu         sync.Mutex
	count      int64
	total      time.Duration
	lo, hi     time.Duration
	last       time.Duration
	lastAnswer time.Time
}

func (l *latency) add(d time.Duration, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == 0 || d < l.lo {
		l.lo = d
	}
	l.hi = max(l.hi, d)
	l.count++
	l.total += d
	l.last, l.lastAnswer = d, at
}

// reset forgets every figure, as AvgMinMaxCounter.reset does for srst
// and crst.
func (l *latency) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count, l.total, l.lo, l.hi, l.last, l.lastAnswer = 0, 0, 0, 0, 0, time.Time{}
}

// latencySnapshot is a latency's figures in ZooKeeper's units: whole
// milliseconds, and the average in milliseconds to four decimals.
type latencySnapshot struct {
	count        int64
	min, max     int64
	avg          float64
	last         int64
	lastAnswer   time.Time
	avgTruncated int64 // ServerCnxn's average: total/count in whole ms
}

func (l *latency) snapshot() latencySnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := latencySnapshot{count: l.count, last: l.last.Milliseconds(), lastAnswer: l.lastAnswer}
	if l.count == 0 {
		return s
	}
	s.min, s.max = l.lo.Milliseconds(), l.hi.Milliseconds()
	avg := float64(l.total) / float64(time.Millisecond) / float64(l.count)
	s.avg = math.Round(avg*1e4) / 1e4
	s.avgTruncated = l.total.Milliseconds() / l.count
	return s
}

// serverStats are the server-wide counters srvr, stat and mntr report.
// Packets count every frame read or written, on connections since closed
// too, as ZooKeeper's ServerStats does.
type serverStats struct {
	received    atomic.Int64
	sent        atomic.Int64
	outstanding atomic.Int64
	authFailed  atomic.Int64
	latency     latency
	responses   bufferStats
}

// reset is srst: ServerStats.reset zeroes the latencies, the packet and
// auth-failure counters and the response sizes; outstanding requests are
// a gauge, not a counter, and stay.
func (s *serverStats) reset() {
	s.latency.reset()
	s.received.Store(0)
	s.sent.Store(0)
	s.authFailed.Store(0)
	s.responses.reset()
}

// bufferStats tracks the sizes of the replies and notifications sent
// (header and body, without the length prefix), as ZooKeeper's
// BufferStats does for mntr's *_client_response_size: -1 until the first.
type bufferStats struct {
	mu             sync.Mutex
	set            bool
	last, min, max int
}

func (b *bufferStats) add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.set || n < b.min {
		b.min = n
	}
	if !b.set || n > b.max {
		b.max = n
	}
	b.last, b.set = n, true
}

func (b *bufferStats) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.set = false
}

// snapshot returns last, min and max, each -1 before the first response.
func (b *bufferStats) snapshot() (last, lo, hi int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.set {
		return -1, -1, -1
	}
	return b.last, b.min, b.max
}

// connStats is what cons shows of one connection beyond its counters.
type connStats struct {
	mu       sync.Mutex
	lastOp   string
	lastCxid int64
	lastZxid int64
	latency  latency
}

// reset is crst for one connection: ServerCnxn.resetStats forgets the
// last operation and the latencies (cons then shows lop=NA again).
func (c *connStats) reset() {
	c.latency.reset()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastOp, c.lastCxid, c.lastZxid = "", 0, 0
}

// opName is the four-letter name ZooKeeper's FinalRequestProcessor records
// as a connection's last operation.
func opName(op jute.OpCode) string {
	switch op {
	case jute.OpPing:
		return "PING"
	case jute.OpMulti:
		return "MULT"
	case jute.OpMultiRead:
		return "MLTR"
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateTTL, jute.OpCreateContainer:
		return "CREA"
	case jute.OpDelete, jute.OpDeleteContainer:
		return "DELE"
	case jute.OpSetData:
		return "SETD"
	case jute.OpReconfig:
		return "RECO"
	case jute.OpSetACL:
		return "SETA"
	case jute.OpCloseSession:
		return "CLOS"
	case jute.OpSync:
		return "SYNC"
	case jute.OpCheck:
		return "CHEC"
	case jute.OpExists:
		return "EXIS"
	case jute.OpGetData:
		return "GETD"
	case jute.OpSetWatches:
		return "SETW"
	case jute.OpSetWatches2:
		return "STW2"
	case jute.OpAddWatch:
		return "ADDW"
	case jute.OpGetACL:
		return "GETA"
	case jute.OpGetChildren, jute.OpGetChildren2:
		return "GETC"
	case jute.OpGetAllChildrenNumber:
		return "GETACN"
	case jute.OpCheckWatches:
		return "CHKW"
	case jute.OpRemoveWatches:
		return "REMW"
	case jute.OpWhoAmI:
		return "HOMI"
	case jute.OpGetEphemerals:
		return "GETE"
	}
	return ""
}

// countsInStats reports whether ZooKeeper counts a request in its latency
// and last-operation figures: auth and SASL are answered before the
// request pipeline and are not.
func countsInStats(op jute.OpCode) bool { return opName(op) != "" }

// record notes one answered request on the connection and the server.
func (c *conn) record(op jute.OpCode, xid int32, zxid int64, d time.Duration, at time.Time) {
	if !countsInStats(op) {
		return
	}
	c.srv.stats.latency.add(d, at)
	c.stats.latency.add(d, at)
	c.stats.mu.Lock()
	if c.stats.lastOp == "" {
		c.stats.lastCxid = -1
	}
	// As ServerCnxn does, keep the last real xid, not a ping's or an
	// auth's special one.
	if xid >= 0 {
		c.stats.lastCxid = int64(xid)
	}
	c.stats.lastOp, c.stats.lastZxid = opName(op), zxid
	c.stats.mu.Unlock()
}

// javaDouble formats v as Java's Double.toString does for the values
// ZooKeeper prints (mntr's averages, srvr's average latency): at least one
// decimal, scientific notation below 10^-3 and from 10^7.
func javaDouble(v float64) string {
	if v == 0 {
		return "0.0"
	}
	if a := math.Abs(v); a < 1e-3 || a >= 1e7 {
		s := strconv.FormatFloat(v, 'E', -1, 64)
		mant, exp, _ := strings.Cut(s, "E")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		e, _ := strconv.Atoi(exp)
		return mant + "E" + strconv.Itoa(e)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
