package load

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testenv"
)

// small are options that make every workload finish in well under a second
// on a loaded machine: the tests check counts and errors, never timings.
func small(prefix string) Options {
	return Options{
		Clients:   4,
		Conns:     2,
		KeySize:   8,
		ValueSize: 32,
		KeySpace:  20,
		Ops:       40,
		ReadRatio: 0.5,
		Watchers:  3,
		Prefix:    prefix,
	}
}

func checkResult(t *testing.T, res *Result, opts Options) {
	t.Helper()
	if res.Errors != 0 {
		t.Errorf("%d errors, first: %v", res.Errors, res.FirstErrors)
	}
	if res.Ops.Count != opts.Ops {
		t.Errorf("%d ops done, want %d", res.Ops.Count, opts.Ops)
	}
	if res.Ops.Latency.Count != uint64(opts.Ops) || res.Ops.Latency.Max <= 0 {
		t.Errorf("latency summary %+v does not describe %d ops", res.Ops.Latency, opts.Ops)
	}
	if res.Events != nil && res.Events.Count == 0 {
		t.Errorf("watch workload delivered no events (expected %d)", res.EventsExpected)
	}
}

func TestEtcdWorkloads(t *testing.T) {
	e := testenv.StartEtcd(t)
	names := keysOf(EtcdWorkloads)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			opts := small("/t/" + name)
			w, err := NewEtcd(ctx, name, e.Endpoints, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			res, err := Run(ctx, name, w, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, opts)
			if name == "watch" && res.Events.Count != res.EventsExpected {
				// etcd watches deliver every revision: nothing may be lost.
				t.Errorf("watchers got %d events, want %d", res.Events.Count, res.EventsExpected)
			}
		})
	}
}

func TestZooKeeperWorkloads(t *testing.T) {
	z := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	for _, name := range keysOf(ZKWorkloads) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			opts := small("/t")
			if name == "zkwatch" {
				// One serial writer with gaps, so one-shot watches are
				// re-armed before the next change and none coalesce.
				opts.Clients, opts.Rate, opts.Ops = 1, 50, 10
			}
			w, err := NewZK(ctx, name, []string{z.Addr}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			res, err := Run(ctx, name, w, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, opts)
		})
	}
}

func TestRunForADuration(t *testing.T) {
	w := fakeWorkload{}
	res, err := Run(t.Context(), "fake", w, Options{Clients: 3, Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops.Count == 0 || res.Errors != 0 {
		t.Errorf("timed run: %d ops, %d errors; want some ops and no errors", res.Ops.Count, res.Errors)
	}
}

func TestRunCountsErrors(t *testing.T) {
	w := fakeWorkload{fail: func(seq int64) bool { return seq%4 == 0 }}
	res, err := Run(t.Context(), "fake", w, Options{Clients: 2, Ops: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops.Count != 100 || res.Errors != 25 || len(res.FirstErrors) == 0 {
		t.Errorf("got %d ops, %d errors (%v); want 100 ops, 25 errors", res.Ops.Count, res.Errors, res.FirstErrors)
	}
}

func TestUnknownWorkload(t *testing.T) {
	if _, err := NewEtcd(t.Context(), "nope", []string{"127.0.0.1:1"}, Options{}); !errors.Is(err, ErrUnknownWorkload) {
		t.Errorf("NewEtcd(nope) = %v, want ErrUnknownWorkload", err)
	}
	if _, err := NewZK(t.Context(), "nope", []string{"127.0.0.1:1"}, Options{}); !errors.Is(err, ErrUnknownWorkload) {
		t.Errorf("NewZK(nope) = %v, want ErrUnknownWorkload", err)
	}
}

func TestKeyName(t *testing.T) {
	tests := []struct {
		i    int64
		size int
		want string
	}{
		{7, 4, "0007"},
		{12345, 3, "12345"},
		{0, 1, "0"},
	}
	for _, tt := range tests {
		if got := keyName(tt.i, tt.size); got != tt.want {
			t.Errorf("keyName(%d, %d) = %q, want %q", tt.i, tt.size, got, tt.want)
		}
	}
}

type fakeWorkload struct{ fail func(seq int64) bool }

func (f fakeWorkload) Worker(int) Worker {
	return func(_ context.Context, seq int64) error {
		if f.fail != nil && f.fail(seq) {
			return fmt.Errorf("op %d failed", seq)
		}
		return nil
	}
}

func (fakeWorkload) Close() error { return nil }

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestProcessCPUFollowsWork(t *testing.T) {
	before, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	if before <= 0 {
		t.Errorf("CPU of this process = %v, want > 0", before)
	}
	// Spin until getrusage has charged this process 20ms more, or fail
	// after ten seconds of wall time.
	deadline := time.Now().Add(10 * time.Second)
	after := before
	for x := uint64(1); after-before < 20*time.Millisecond && time.Now().Before(deadline); x = x*6364136223846793005 + 1 {
		if x%(1<<16) == 0 {
			if after, err = ProcessCPU(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after-before < 20*time.Millisecond {
		t.Errorf("CPU of this process went from %v to %v after spinning, want at least 20ms more", before, after)
	}
}

func TestNewCPU(t *testing.T) {
	c := NewCPU(1500*time.Millisecond, 30000)
	if c.Seconds != 1.5 || c.MicrosPerOp != 50 {
		t.Errorf("NewCPU(1.5s, 30000 ops) = %+v, want 1.5 s and 50 µs/op", c)
	}
	if c := NewCPU(time.Second, 0); c.MicrosPerOp != 0 {
		t.Errorf("NewCPU(1s, 0 ops) = %+v, want 0 µs/op", c)
	}
}

func TestRunMeasuresClientCPU(t *testing.T) {
	res, err := Run(t.Context(), "fake", fakeWorkload{}, Options{Clients: 2, Ops: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ClientCPU == nil || res.ClientCPU.Seconds < 0 || res.ClientCPU.MicrosPerOp < 0 {
		t.Errorf("client CPU of a run = %+v, want a non-negative figure", res.ClientCPU)
	}
	if res.ServerCPU != nil {
		t.Errorf("Run set server CPU %+v; only its caller knows the servers", res.ServerCPU)
	}
}
