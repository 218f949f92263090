package linearize

import (
	"errors"
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"
)

// ZKOp names an operation of the ZooKeeper znode model.
type ZKOp uint8

const (
	ZKGet    ZKOp = iota // sync, then getData
	ZKCreate             // create a persistent znode
	ZKSet                // setData with an expected version (-1: any)
	ZKDelete             // delete with an expected version (-1: any)
)

// ZKInput is what a client asked.
type ZKInput struct {
	Op      ZKOp
	Path    string
	Data    string
	Version int32 // Set and Delete: expected version, -1 for any
}

// ZKResult is how the server answered.
type ZKResult uint8

const (
	ZKOK ZKResult = iota
	ZKUnknown
	ZKNoNode
	ZKNodeExists
	ZKBadVersion
)

var zkResultNames = [...]string{"ok", "unknown", "NoNode", "NodeExists", "BadVersion"}

func (r ZKResult) String() string { return zkResultNames[r] }

// ZKOutput is what the client got back.
type ZKOutput struct {
	Result  ZKResult
	Data    string // Get
	Version int32  // Get and Set: the znode's data version
}

// zkState is the model's state for one znode; comparable.
type zkState struct {
	Exists  bool
	Data    string
	Version int32
}

// ZKModel is one znode per path with versioned data. It partitions by
// path. Reads are sync+getData on one connection, which Janus makes
// linearizable (sync catches the server up with the leader's commit point).
var ZKModel = porcupine.Model{
	Partition: partitionBy(func(in any) string { return in.(ZKInput).Path }),
	Init:      func() any { return zkState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(zkState), input.(ZKInput), output.(ZKOutput)
		versionOK := st.Exists && (in.Version == -1 || in.Version == st.Version)
		// next is the state if the write takes effect here, ok whether it may.
		var next zkState
		var may bool
		var refusal ZKResult
		switch in.Op {
		case ZKGet:
			if !st.Exists {
				return out.Result == ZKNoNode, st
			}
			return out.Result == ZKOK && out.Data == st.Data && out.Version == st.Version, st
		case ZKCreate:
			next, may, refusal = zkState{Exists: true, Data: in.Data}, !st.Exists, ZKNodeExists
		case ZKSet:
			next, may = zkState{Exists: true, Data: in.Data, Version: st.Version + 1}, versionOK
			refusal = ZKBadVersion
			if !st.Exists {
				refusal = ZKNoNode
			}
		case ZKDelete:
			next, may = zkState{}, versionOK
			refusal = ZKBadVersion
			if !st.Exists {
				refusal = ZKNoNode
			}
		default:
			return false, st
		}
		switch {
		case out.Result == ZKUnknown && may:
			return true, next
		case out.Result == ZKUnknown:
			return true, st
		case out.Result == ZKOK && may:
			return in.Op != ZKSet || out.Version == next.Version, next
		case !may && out.Result == refusal:
			return true, st
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(ZKInput), output.(ZKOutput)
		switch in.Op {
		case ZKGet:
			if out.Result == ZKOK {
				return fmt.Sprintf("get(%s) -> %q v%d", in.Path, out.Data, out.Version)
			}
			return fmt.Sprintf("get(%s) -> %s", in.Path, out.Result)
		case ZKCreate:
			return fmt.Sprintf("create(%s, %q) -> %s", in.Path, in.Data, out.Result)
		case ZKSet:
			return fmt.Sprintf("set(%s, %q, v%d) -> %s v%d", in.Path, in.Data, in.Version, out.Result, out.Version)
		default:
			return fmt.Sprintf("delete(%s, v%d) -> %s", in.Path, in.Version, out.Result)
		}
	},
	DescribeState: func(state any) string {
		st := state.(zkState)
		if !st.Exists {
			return "absent"
		}
		return fmt.Sprintf("%q v%d", st.Data, st.Version)
	},
}

// zkResultOf classifies a go-zookeeper error. Anything but a definite
// refusal leaves the outcome unknown: the request may have reached the
// leader before the connection broke.
func zkResultOf(err error) ZKResult {
	switch {
	case err == nil:
		return ZKOK
	case errors.Is(err, zk.ErrNoNode):
		return ZKNoNode
	case errors.Is(err, zk.ErrNodeExists):
		return ZKNodeExists
	case errors.Is(err, zk.ErrBadVersion):
		return ZKBadVersion
	}
	return ZKUnknown
}

// ZKClient runs operations through one go-zookeeper connection and
// records them in a History as one model client.
type ZKClient struct {
	Conn *zk.Conn
	H    *History
	ID   int
}

// Value returns data unique to this client and seq.
func (c *ZKClient) Value(seq int) string { return fmt.Sprintf("z%d-%d", c.ID, seq) }

func (c *ZKClient) record(in ZKInput, out ZKOutput, call, ret int64) {
	c.H.Add(c.ID, in, out, call, ret, out.Result == ZKUnknown)
}

// Get syncs path, then reads it. A read that failed for any reason but
// NoNode is not recorded. The call time is taken before the sync: the
// read may reflect any write committed after that.
func (c *ZKClient) Get(path string) error {
	call := c.H.Now()
	if _, err := c.Conn.Sync(path); err != nil {
		return err
	}
	data, st, err := c.Conn.Get(path)
	ret := c.H.Now()
	res := zkResultOf(err)
	if res != ZKOK && res != ZKNoNode {
		return err
	}
	out := ZKOutput{Result: res}
	if res == ZKOK {
		out.Data, out.Version = string(data), st.Version
	}
	c.record(ZKInput{Op: ZKGet, Path: path}, out, call, ret)
	return nil
}

// Create creates a persistent znode.
func (c *ZKClient) Create(path, data string) error {
	call := c.H.Now()
	_, err := c.Conn.Create(path, []byte(data), 0, zk.WorldACL(zk.PermAll))
	ret := c.H.Now()
	c.record(ZKInput{Op: ZKCreate, Path: path, Data: data}, ZKOutput{Result: zkResultOf(err)}, call, ret)
	return err
}

// Set writes data if the znode's version is version (-1: any) and
// returns the new version.
func (c *ZKClient) Set(path, data string, version int32) (int32, error) {
	call := c.H.Now()
	st, err := c.Conn.Set(path, []byte(data), version)
	ret := c.H.Now()
	out := ZKOutput{Result: zkResultOf(err)}
	if err == nil {
		out.Version = st.Version
	}
	c.record(ZKInput{Op: ZKSet, Path: path, Data: data, Version: version}, out, call, ret)
	return out.Version, err
}

// Delete removes the znode if its version is version (-1: any).
func (c *ZKClient) Delete(path string, version int32) error {
	call := c.H.Now()
	err := c.Conn.Delete(path, version)
	ret := c.H.Now()
	c.record(ZKInput{Op: ZKDelete, Path: path, Version: version}, ZKOutput{Result: zkResultOf(err)}, call, ret)
	return err
}
