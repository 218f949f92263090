package load

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// keyName returns the key name for number i: the decimal number, zero-padded
// to size bytes (longer if i needs more digits), so that every key of a run
// has the same length and sorts by number.
func keyName(i int64, size int) string {
	s := strconv.FormatInt(i, 10)
	if len(s) >= size {
		return s
	}
	b := make([]byte, size)
	for j := range size - len(s) {
		b[j] = '0'
	}
	copy(b[size-len(s):], s)
	return string(b)
}

// value returns a value of n bytes. The bytes are printable and varied so
// that neither a protocol nor a compressing store gets an unfair advantage.
func value(n int, r *rand.Rand) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return b
}

// stampValue returns a value of at least 8 bytes that starts with the
// current time, for measuring watch delivery latency; the rest is pad.
func stampValue(pad []byte) []byte {
	b := make([]byte, 8, 8+len(pad))
	binary.BigEndian.PutUint64(b, uint64(time.Now().UnixNano()))
	return append(b, pad...)
}

// stampOf returns the time stampValue put into v, and false if v carries
// none.
func stampOf(v []byte) (time.Time, bool) {
	if len(v) < 8 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))), true
}

// workerRand returns worker i's own random source, seeded so that runs are
// repeatable.
func workerRand(i int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(i)+1, 0x6a616e7573))
}

// parallel runs fn(i) for i in [0, n) on `workers` goroutines and returns
// the first error.
func parallel(ctx context.Context, n int64, workers int, fn func(ctx context.Context, worker int, i int64) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		next     int64
		firstErr error
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if err := fn(ctx, w, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
