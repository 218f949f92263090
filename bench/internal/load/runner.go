// Package load drives workloads against etcd v3 and ZooKeeper endpoints and
// measures them: a fixed number of client goroutines issue operations until a
// total count or a duration is reached, optionally at a fixed aggregate rate,
// and every operation's latency goes into the worker's own histogram.
//
// With a rate limit, each operation has an intended start time and its
// latency is measured from that time, not from when the worker got round to
// it: a stalled server then shows up in the latency figures instead of
// silently lowering the offered load (coordinated omission).
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/januskv/janus/bench/internal/hist"
)

// Options are the knobs every workload shares.
type Options struct {
	// Clients is the number of concurrent workers issuing operations.
	Clients int
	// Conns is the number of etcd client connections or ZooKeeper sessions
	// the workers share (worker i uses connection i % Conns).
	Conns int
	// KeySize is the length of each key's last component in bytes.
	KeySize int
	// ValueSize is the length of each written value in bytes.
	ValueSize int
	// KeySpace is how many distinct keys writes and reads pick from.
	KeySpace int
	// Ops is the total number of operations; zero means run for Duration.
	Ops int64
	// Duration bounds the run when Ops is zero.
	Duration time.Duration
	// Rate is the aggregate operations per second; zero means as fast as
	// the server answers.
	Rate float64
	// ReadRatio is the fraction of reads in the mixed workloads.
	ReadRatio float64
	// Watchers is the number of watchers in the watch fan-out workloads.
	Watchers int
	// Prefix namespaces every key or znode the workload touches, so rounds
	// and workloads do not see each other's data.
	Prefix string
	// Progress, if not nil, receives a progress line (rewritten in place
	// with \r) about every half second.
	Progress io.Writer
}

func (o Options) withDefaults() Options {
	if o.Clients <= 0 {
		o.Clients = 1
	}
	if o.Conns <= 0 {
		o.Conns = 1
	}
	o.Conns = min(o.Conns, o.Clients)
	if o.KeySize <= 0 {
		o.KeySize = 8
	}
	if o.ValueSize < 0 {
		o.ValueSize = 0
	}
	if o.KeySpace <= 0 {
		o.KeySpace = 1
	}
	if o.Ops <= 0 && o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Watchers <= 0 {
		o.Watchers = 1
	}
	if o.Prefix == "" {
		o.Prefix = "/bench"
	}
	return o
}

// Stream is one measured flow: the operations themselves, or the watch
// events they cause.
type Stream struct {
	Count      int64        `json:"count"`
	Throughput float64      `json:"per_second"`
	Latency    hist.Summary `json:"latency"`
}

// Result is the outcome of one run of one workload against one target.
type Result struct {
	Workload string        `json:"workload"`
	Target   string        `json:"target,omitempty"`
	Clients  int           `json:"clients"`
	Conns    int           `json:"conns"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Ops      Stream        `json:"ops"`
	Errors   int64         `json:"errors"`
	// FirstErrors are up to a few error messages, to say what went wrong.
	FirstErrors []string `json:"first_errors,omitempty"`
	// Events is set by the watch workloads: what the watchers received.
	Events *Stream `json:"events,omitempty"`
	// EventsExpected is how many events full delivery would be.
	EventsExpected int64 `json:"events_expected,omitempty"`
	// ClientCPU is the CPU time the whole load-generating process spent
	// during the run, per operation too: the cost of the clients, which
	// share the machine with the servers. Nil if it could not be read.
	ClientCPU *CPU `json:"client_cpu,omitempty"`
	// ServerCPU is the CPU time the server processes spent during the
	// run, summed over the members, when the caller started them and can
	// read it (bench compare); nil otherwise.
	ServerCPU *CPU `json:"server_cpu,omitempty"`

	// hist and eventHist are the full histograms, for merging rounds.
	hist, eventHist *hist.Histogram
}

// Histogram returns the operations' latency histogram.
func (r *Result) Histogram() *hist.Histogram { return r.hist }

// EventHistogram returns the watch events' delivery latency histogram, or
// nil for workloads without watches.
func (r *Result) EventHistogram() *hist.Histogram { return r.eventHist }

// Worker issues one operation; seq numbers operations 0, 1, 2... across all
// workers and is unique to this call.
type Worker func(ctx context.Context, seq int64) error

// Workload is a prepared workload: its connections are open and its data
// loaded.
type Workload interface {
	// Worker returns the operation function of worker i; each is called
	// from one goroutine only.
	Worker(i int) Worker
	// Close ends the workload's connections and goroutines.
	Close() error
}

// eventSource is implemented by workloads whose operations cause watch
// events that are measured separately.
type eventSource interface {
	// watches reports whether this workload measures events at all.
	watches() bool
	// Drain waits, until ctx ends, for the events that ops operations
	// should have caused, then reports the delivery histogram, how many
	// arrived and how many were expected.
	Drain(ctx context.Context, ops int64) (h *hist.Histogram, got, expected int64)
}

const maxErrorSamples = 5

// Run runs w with opts until the operation count or duration is reached or
// ctx ends.
func Run(ctx context.Context, name string, w Workload, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	var (
		next     atomic.Int64 // next operation sequence number
		done     atomic.Int64 // completed operations, for progress
		errCount atomic.Int64
		errMu    sync.Mutex
		errs     []string
	)
	// The duration ends the issuing of operations, not the operations in
	// flight: cancelling those would leave it unknown whether the server
	// applied them, and watch workloads must know how many writes to
	// expect events for. ctx still ends everything.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Ops <= 0 {
		stopIssuing := time.AfterFunc(opts.Duration, cancel)
		defer stopIssuing.Stop()
	}

	hists := make([]*hist.Histogram, opts.Clients)
	cpuBefore, cpuErr := ProcessCPU()
	start := time.Now()
	var interval time.Duration
	if opts.Rate > 0 {
		interval = time.Duration(float64(time.Second) / opts.Rate)
	}

	progressDone := make(chan struct{})
	progressStopped := make(chan struct{})
	go func() {
		defer close(progressStopped)
		if opts.Progress == nil {
			return
		}
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-progressDone:
				fmt.Fprint(opts.Progress, "\r\033[K")
				return
			case <-tick.C:
				el := time.Since(start)
				n := done.Load()
				fmt.Fprintf(opts.Progress, "\r\033[K%s: %d ops, %.0f ops/s, %d errors, %s",
					name, n, float64(n)/el.Seconds(), errCount.Load(), el.Truncate(100*time.Millisecond))
			}
		}
	}()

	var wg sync.WaitGroup
	for i := range opts.Clients {
		h := hist.New()
		hists[i] = h
		op := w.Worker(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				seq := next.Add(1) - 1
				if opts.Ops > 0 && seq >= opts.Ops {
					return
				}
				began := time.Now()
				if interval > 0 {
					began = start.Add(time.Duration(seq) * interval)
					if wait := time.Until(began); wait > 0 {
						t := time.NewTimer(wait)
						select {
						case <-runCtx.Done():
							t.Stop()
							return
						case <-t.C:
						}
					}
				}
				err := op(ctx, seq)
				h.Record(time.Since(began))
				done.Add(1)
				if err != nil {
					errCount.Add(1)
					errMu.Lock()
					if len(errs) < maxErrorSamples {
						errs = append(errs, err.Error())
					}
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(progressDone)
	<-progressStopped
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run %s: %w", name, err)
	}

	all := hist.New()
	for _, h := range hists {
		all.Merge(h)
	}
	res := &Result{
		Workload:    name,
		Clients:     opts.Clients,
		Conns:       opts.Conns,
		Elapsed:     elapsed,
		Errors:      errCount.Load(),
		FirstErrors: errs,
		hist:        all,
	}
	res.Ops = Stream{Count: int64(all.Count()), Throughput: float64(all.Count()) / elapsed.Seconds(), Latency: all.Summarize()}

	if src, ok := w.(eventSource); ok && src.watches() {
		drainCtx, cancelDrain := context.WithTimeout(ctx, 60*time.Second)
		eh, got, expected := src.Drain(drainCtx, res.Ops.Count-res.Errors)
		cancelDrain()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("run %s: %w", name, ctx.Err())
		}
		// Events per second from the first write until the drain saw the
		// last event: watchers that fall behind the writers must not look
		// faster than they are.
		res.Events = &Stream{Count: got, Throughput: float64(got) / time.Since(start).Seconds(), Latency: eh.Summarize()}
		res.EventsExpected = expected
		res.eventHist = eh
	}
	if cpuErr == nil {
		if cpuAfter, err := ProcessCPU(); err == nil {
			res.ClientCPU = NewCPU(cpuAfter-cpuBefore, res.Ops.Count)
		}
	}
	return res, nil
}

// ErrUnknownWorkload is returned for a workload name no protocol knows.
var ErrUnknownWorkload = errors.New("unknown workload")
