package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/januskv/janus/core"
)

// TestReadsDuringApply reads latest and past revisions and replays events
// from several goroutines while groups are applied and compacted: every
// View must be internally consistent (its Meta names its revision) and the
// only refusal allowed is a compacted revision.
func TestReadsDuringApply(t *testing.T) {
	h := newHarness(t, 11)
	for h.gen.index < 200 {
		h.step(h.groupSize())
	}
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := readOnce(h.s, int64(r+i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for h.gen.index < 1200 {
		h.step(h.groupSize())
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h.checkLatest()
}

func readOnce(s *Store, salt int64) error {
	rev := s.Rev()
	at := rev - salt%50
	v, err := s.At(at)
	if errors.Is(err, core.ErrCompacted) {
		return nil
	}
	if err != nil {
		return err
	}
	defer v.Close()
	meta, err := v.Meta()
	if err != nil {
		return err
	}
	if meta.Rev != v.Rev() {
		return errors.New("view's meta disagrees with its revision")
	}
	var future *core.Node
	if err := v.Range(nil, nil, func(n *core.Node) bool {
		if n.ModRev > v.Rev() {
			future = n
		}
		return future == nil
	}); err != nil {
		return err
	}
	if future != nil {
		return fmt.Errorf("view at %d shows %q modified at %d", v.Rev(), future.Key, future.ModRev)
	}
	if _, err := s.Events(at, at+5); err != nil && !errors.Is(err, core.ErrCompacted) {
		return err
	}
	return nil
}
