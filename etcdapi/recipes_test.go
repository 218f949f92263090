package etcdapi_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
)

// TestMutexUnderContention runs clientv3's Mutex from several sessions
// over a read-modify-write of a shared counter that is not atomic on its
// own: the final count is right only if the lock excludes.
func TestMutexUnderContention(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	const workers, rounds = 4, 10
	var inside int32
	var mu sync.Mutex // guards inside, which checks exclusion directly too
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, j.Endpoint)
			s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			m := concurrency.NewMutex(s, "/locks/counter")
			for range rounds {
				if err := m.Lock(ctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					errs <- fmt.Errorf("worker %d: %d holders at once", w, inside)
				}
				mu.Unlock()
				if err := incrementUnsafely(ctx, c, "counter"); err != nil {
					errs <- err
				}
				mu.Lock()
				inside--
				mu.Unlock()
				if err := m.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := readCounter(t, j.Client, "counter"); got != workers*rounds {
		t.Fatalf("counter = %d, want %d", got, workers*rounds)
	}
}

// incrementUnsafely reads and then writes, with no compare: two holders at
// once would lose an increment.
func incrementUnsafely(ctx context.Context, c *clientv3.Client, key string) error {
	resp, err := c.Get(ctx, key)
	if err != nil {
		return err
	}
	n := 0
	if len(resp.Kvs) == 1 {
		n, _ = strconv.Atoi(string(resp.Kvs[0].Value))
	}
	_, err = c.Put(ctx, key, strconv.Itoa(n+1))
	return err
}

func readCounter(t *testing.T, c *clientv3.Client, key string) int {
	t.Helper()
	resp, err := c.Get(testCtx(t), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read %s: %+v, %v", key, resp, err)
	}
	n, _ := strconv.Atoi(string(resp.Kvs[0].Value))
	return n
}

// TestSTMUnderContention increments one counter through serializable STM
// transactions from several clients; conflicts retry, none is lost.
func TestSTMUnderContention(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	const workers, rounds = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, j.Endpoint)
			for range rounds {
				_, err := concurrency.NewSTM(c, func(s concurrency.STM) error {
					n, _ := strconv.Atoi(s.Get("stm"))
					s.Put("stm", strconv.Itoa(n+1))
					return nil
				}, concurrency.WithAbortContext(ctx))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := readCounter(t, j.Client, "stm"); got != workers*rounds {
		t.Fatalf("counter = %d, want %d", got, workers*rounds)
	}
}

// TestElectionHandsOver campaigns from two sessions: the second leads only
// once the first resigns, and observers see both leaders.
func TestElectionHandsOver(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	s1, err := concurrency.NewSession(newClient(t, j.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := concurrency.NewSession(newClient(t, j.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	e1, e2 := concurrency.NewElection(s1, "/elect"), concurrency.NewElection(s2, "/elect")
	observe := concurrency.NewElection(s1, "/elect").Observe(ctx)
	if err := e1.Campaign(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	won := make(chan error, 1)
	go func() { won <- e2.Campaign(ctx, "two") }()
	if got := string((<-observe).Kvs[0].Value); got != "one" {
		t.Fatalf("observed leader %q, want one", got)
	}
	select {
	case err := <-won:
		t.Fatalf("second campaign won while the first leads: %v", err)
	default:
	}
	if err := e1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	if got := string((<-observe).Kvs[0].Value); got != "two" {
		t.Fatalf("observed leader %q, want two", got)
	}
}

// TestLockAndElectionServices exercises the server-side v3lock and
// v3election services over gRPC.
func TestLockAndElectionServices(t *testing.T) {
	j := startJanus(t)
	ctx := testCtx(t)
	conn := j.Client.ActiveConnection()
	lease, err := j.Client.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	locks := v3lockpb.NewLockClient(conn)
	held, err := locks.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("svc"), Lease: int64(lease.ID)})
	if err != nil {
		t.Fatal(err)
	}
	// A second locker waits until the first unlocks.
	lease2, err := j.Client.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan *v3lockpb.LockResponse, 1)
	go func() {
		r, err := locks.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("svc"), Lease: int64(lease2.ID)})
		if err != nil {
			t.Error(err)
		}
		second <- r
	}()
	select {
	case <-second:
		t.Fatal("second lock granted while the first is held")
	default:
	}
	if _, err := locks.Unlock(ctx, &v3lockpb.UnlockRequest{Key: held.Key}); err != nil {
		t.Fatal(err)
	}
	if r := <-second; r == nil || r.Header.Revision <= held.Header.Revision {
		t.Fatalf("second lock: %+v", r)
	}

	el := v3electionpb.NewElectionClient(conn)
	camp, err := el.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("svc-e"), Lease: int64(lease.ID), Value: []byte("me")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := el.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: camp.Leader, Value: []byte("still me")}); err != nil {
		t.Fatal(err)
	}
	leader, err := el.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("svc-e")})
	if err != nil || string(leader.Kv.Value) != "still me" {
		t.Fatalf("leader: %+v, %v", leader, err)
	}
	if _, err := el.Resign(ctx, &v3electionpb.ResignRequest{Leader: camp.Leader}); err != nil {
		t.Fatal(err)
	}
}
