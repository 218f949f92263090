package linearize

import (
	"context"
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdOp names an operation of the etcd KV model.
type EtcdOp uint8

const (
	EtcdGet EtcdOp = iota // linearizable Range of one key
	EtcdPut               // Put of one key
	EtcdCAS               // Txn: if the key's value is Expect (absent if Expect is "") then Put else Get
)

// EtcdInput is what a client asked.
type EtcdInput struct {
	Op     EtcdOp
	Key    string
	Value  string // Put and CAS: the value written
	Expect string // CAS: the value compared against; "" means absent
}

// EtcdOutput is what the client got back.
type EtcdOutput struct {
	Unknown   bool   // a write whose outcome the client cannot know
	Found     bool   // Get: the key exists
	Value     string // Get: its value
	ModRev    int64  // Get: its mod revision
	Succeeded bool   // CAS: the comparison held
	Rev       int64  // header revision of the response
}

// etcdState is the model's state for one key; comparable, so porcupine's
// default equality works.
type etcdState struct {
	Found bool
	Value string
}

// EtcdModel is a single register per key, with linearizable reads, blind
// writes and compare-and-set. It partitions by key, so histories over a
// small key set check quickly.
var EtcdModel = porcupine.Model{
	Partition: partitionBy(func(in any) string { return in.(EtcdInput).Key }),
	Init:      func() any { return etcdState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(etcdState), input.(EtcdInput), output.(EtcdOutput)
		switch in.Op {
		case EtcdGet:
			return out.Found == st.Found && (!st.Found || out.Value == st.Value), st
		case EtcdPut:
			return true, etcdState{Found: true, Value: in.Value}
		case EtcdCAS:
			holds := (in.Expect == "" && !st.Found) || (in.Expect != "" && st.Found && st.Value == in.Expect)
			if out.Unknown {
				if holds {
					return true, etcdState{Found: true, Value: in.Value}
				}
				return true, st
			}
			if out.Succeeded != holds {
				return false, st
			}
			if holds {
				return true, etcdState{Found: true, Value: in.Value}
			}
			return true, st
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(EtcdInput), output.(EtcdOutput)
		res := ""
		switch {
		case out.Unknown:
			res = "unknown"
		case in.Op == EtcdGet && !out.Found:
			res = "absent"
		case in.Op == EtcdGet:
			res = fmt.Sprintf("%q@%d", out.Value, out.ModRev)
		case in.Op == EtcdCAS:
			res = fmt.Sprintf("succeeded=%v", out.Succeeded)
		default:
			res = "ok"
		}
		switch in.Op {
		case EtcdGet:
			return fmt.Sprintf("get(%s) -> %s (rev %d)", in.Key, res, out.Rev)
		case EtcdPut:
			return fmt.Sprintf("put(%s, %q) -> %s (rev %d)", in.Key, in.Value, res, out.Rev)
		default:
			return fmt.Sprintf("cas(%s, %q -> %q) -> %s (rev %d)", in.Key, in.Expect, in.Value, res, out.Rev)
		}
	},
	DescribeState: func(state any) string {
		st := state.(etcdState)
		if !st.Found {
			return "absent"
		}
		return fmt.Sprintf("%q", st.Value)
	},
}

// partitionBy splits a history into one sub-history per key.
func partitionBy(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range ops {
			k := key(op.Input)
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	}
}

// EtcdClient runs operations through a clientv3 client and records them in
// a History as one model client. Values written must be unique across the
// history (CheckEtcdRevisions relies on it); Value makes such values.
type EtcdClient struct {
	KV clientv3.KV
	H  *History
	ID int
}

// Value returns a value unique to this client and seq.
func (c *EtcdClient) Value(seq int) string { return fmt.Sprintf("c%d-%d", c.ID, seq) }

// Get reads key linearizably and returns its value ("" if absent). A
// failed read is not recorded.
func (c *EtcdClient) Get(ctx context.Context, key string) (string, error) {
	call := c.H.Now()
	resp, err := c.KV.Get(ctx, key)
	ret := c.H.Now()
	if err != nil {
		return "", err
	}
	out := EtcdOutput{Rev: resp.Header.Revision}
	if len(resp.Kvs) > 0 {
		out.Found, out.Value, out.ModRev = true, string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
	}
	c.H.Add(c.ID, EtcdInput{Op: EtcdGet, Key: key}, out, call, ret, false)
	c.H.Revision(c.ID, out.Rev)
	return out.Value, nil
}

// Put writes key. A failed put is recorded with an unknown outcome.
func (c *EtcdClient) Put(ctx context.Context, key, value string) error {
	call := c.H.Now()
	resp, err := c.KV.Put(ctx, key, value)
	ret := c.H.Now()
	in := EtcdInput{Op: EtcdPut, Key: key, Value: value}
	if err != nil {
		c.H.Add(c.ID, in, EtcdOutput{Unknown: true}, call, ret, true)
		return err
	}
	c.H.Add(c.ID, in, EtcdOutput{Rev: resp.Header.Revision}, call, ret, false)
	c.H.Revision(c.ID, resp.Header.Revision)
	return nil
}

// CAS writes value to key if its value is expect ("" meaning absent), in
// one Txn. A failed CAS is recorded with an unknown outcome.
func (c *EtcdClient) CAS(ctx context.Context, key, expect, value string) (bool, error) {
	cmp := clientv3.Compare(clientv3.Value(key), "=", expect)
	if expect == "" {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	call := c.H.Now()
	resp, err := c.KV.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, value)).Commit()
	ret := c.H.Now()
	in := EtcdInput{Op: EtcdCAS, Key: key, Value: value, Expect: expect}
	if err != nil {
		c.H.Add(c.ID, in, EtcdOutput{Unknown: true}, call, ret, true)
		return false, err
	}
	c.H.Add(c.ID, in, EtcdOutput{Succeeded: resp.Succeeded, Rev: resp.Header.Revision}, call, ret, false)
	c.H.Revision(c.ID, resp.Header.Revision)
	return resp.Succeeded, nil
}

// CheckEtcdRevisions checks what the register model leaves out: every
// value, wherever it was read, carries the mod revision its write was
// acknowledged with, and no read's header revision is below the mod
// revision it returned. Values must be unique across the history.
func CheckEtcdRevisions(ops []porcupine.Operation) error {
	written := map[string]int64{}
	for _, op := range ops {
		in, out := op.Input.(EtcdInput), op.Output.(EtcdOutput)
		if out.Unknown || (in.Op == EtcdCAS && !out.Succeeded) || in.Op == EtcdGet {
			continue
		}
		if prev, dup := written[in.Value]; dup {
			return fmt.Errorf("value %q written twice (revisions %d and %d): values must be unique", in.Value, prev, out.Rev)
		}
		written[in.Value] = out.Rev
	}
	for _, op := range ops {
		in, out := op.Input.(EtcdInput), op.Output.(EtcdOutput)
		if in.Op != EtcdGet || !out.Found {
			continue
		}
		if out.ModRev > out.Rev {
			return fmt.Errorf("get(%s) at header revision %d returned mod revision %d", in.Key, out.Rev, out.ModRev)
		}
		if rev, ok := written[out.Value]; ok && rev != out.ModRev {
			return fmt.Errorf("get(%s) returned %q at mod revision %d; its write was acknowledged at revision %d", in.Key, out.Value, out.ModRev, rev)
		}
	}
	return nil
}
