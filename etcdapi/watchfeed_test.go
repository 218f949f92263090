package etcdapi

import (
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var watchIndexSeed = flag.Uint64("etcdapi.watchindex-seed", 0, "seed of the watch index test (0: one from the clock, logged)")

// TestWatchIndexMatchesEveryWatcher adds and removes random watchers of
// single keys, ranges and every key from one on, and checks after each
// step that the index finds, for every key of a small key space, exactly
// the watchers that match it. The seed is logged and accepted back through
// -etcdapi.watchindex-seed.
func TestWatchIndexMatchesEveryWatcher(t *testing.T) {
	seed := *watchIndexSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -etcdapi.watchindex-seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	// Keys of one and two letters from a small alphabet, so ranges,
	// prefixes and duplicate intervals collide often.
	var keys [][]byte
	for _, a := range "abcd" {
		keys = append(keys, []byte{byte(a)})
		for _, b := range "abcd" {
			keys = append(keys, []byte{byte(a), byte(b)})
		}
	}
	keys = append(keys, []byte{0})
	randomKey := func() []byte { return keys[rng.IntN(len(keys))] }

	x := newWatchIndex()
	var in []*watcher
	for step := range 600 {
		if len(in) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(in))
			x.remove(in[i])
			in = slices.Delete(in, i, i+1)
		} else {
			w := &watcher{id: int64(step), key: randomKey()}
			switch rng.IntN(3) {
			case 1:
				a, b := randomKey(), randomKey()
				if string(a) > string(b) {
					a, b = b, a
				}
				if string(a) == string(b) {
					b = append(slices.Clone(b), 'z')
				}
				w.key, w.end = a, b
			case 2:
				w.fromKey = true
			}
			x.add(w)
			in = append(in, w)
		}
		if x.len() != len(in) {
			t.Fatalf("step %d: index holds %d watchers, want %d", step, x.len(), len(in))
		}
		for _, k := range keys {
			var got, want []int64
			x.visit(k, func(w *watcher) { got = append(got, w.id) })
			for _, w := range in {
				if w.matches(k) {
					want = append(want, w.id)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: key %q: index finds %v, want %v", step, k, got, want)
			}
		}
		var all []int64
		x.each(func(w *watcher) { all = append(all, w.id) })
		if len(all) != len(in) {
			t.Fatalf("step %d: each visits %d watchers, want %d", step, len(all), len(in))
		}
	}
}
