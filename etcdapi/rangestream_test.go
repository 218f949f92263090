package etcdapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/testenv"
)

// TestRangeStreamAgainstEtcd compares etcd v3.7's RangeStream, chunk by
// chunk, with a real etcd on the same data: chunk sizes (10 keys, then
// doubled or halved by the size of the last chunk), the last chunk's
// header, more and count, limit, count_only, keys_only, a revision (old,
// compacted, future), the refused sorts and revision filters, and a
// sort by value with no order, which etcd applies to each chunk alone.
// Then the clients: clientv3's GetStream and `etcdctl get --stream`.
func TestRangeStreamAgainstEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real etcd")
	}
	ctx := testCtx(t)
	ref := testenv.StartEtcd(t)
	j := startJanus(t)
	sides := []*side{{name: "etcd", c: newClient(t, ref.Endpoints...)}, {name: "janus", c: j.Client}}
	endpoints := []string{ref.Endpoints[0], j.Endpoint}
	var old, compacted int64
	for _, s := range sides {
		put := func(k, v string) int64 {
			resp, err := s.c.Put(ctx, k, v)
			if err != nil {
				t.Fatalf("%s: put %s: %v", s.name, k, err)
			}
			return resp.Header.Revision
		}
		for i := range 300 {
			put(fmt.Sprintf("s/%03d", i), strings.Repeat(string(rune('a'+i%26)), i%7))
		}
		compacted = put("s/000", "first")
		old = put("s/001", "second")
		put("t/after", "x")
		if _, err := s.c.Delete(ctx, "s/002"); err != nil {
			t.Fatalf("%s: delete: %v", s.name, err)
		}
		// Values large enough that etcd halves the next chunk.
		for i := range 12 {
			put(fmt.Sprintf("big/%02d", i), strings.Repeat("v", 400<<10))
		}
		if _, err := s.c.Compact(ctx, compacted+1); err != nil {
			t.Fatalf("%s: compact: %v", s.name, err)
		}
	}
	for _, tc := range []struct {
		name string
		req  *pb.RangeRequest
	}{
		{"prefix", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0")}},
		{"everything", &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}},
		{"one key", &pb.RangeRequest{Key: []byte("s/005")}},
		{"a missing key", &pb.RangeRequest{Key: []byte("nope")}},
		{"an empty range", &pb.RangeRequest{Key: []byte("s0"), RangeEnd: []byte("s/")}},
		{"big values", &pb.RangeRequest{Key: []byte("big/"), RangeEnd: []byte("big0")}},
		{"limit 5", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Limit: 5}},
		{"limit 10", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Limit: 10}},
		{"limit 25", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Limit: 25}},
		{"limit 299", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Limit: 299}},
		{"limit 1000", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Limit: 1000}},
		{"count only", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), CountOnly: true, Limit: 3}},
		{"keys only", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), KeysOnly: true, Limit: 40}},
		{"serializable", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Serializable: true}},
		{"old revision", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Revision: old}},
		{"compaction point", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Revision: compacted + 1}},
		{"compacted revision", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Revision: compacted}},
		{"future revision", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Revision: 1 << 40}},
		{"sort by key ascending", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), SortOrder: pb.RangeRequest_ASCEND}},
		{"sort by key descending", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), SortOrder: pb.RangeRequest_DESCEND}},
		{"sort by value, no order", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), SortTarget: pb.RangeRequest_VALUE}},
		{"revision filter", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), MinModRevision: 3}},
		{"empty key", &pb.RangeRequest{}},
	} {
		var outs [2]string
		for i, s := range sides {
			outs[i] = rangeStreamText(ctx, s, tc.req)
		}
		if outs[0] != outs[1] {
			t.Errorf("%s:\netcd:\n%s\njanus:\n%s", tc.name, outs[0], outs[1])
		}
	}

	// clientv3, as a caller of GetStream sees it.
	for _, opts := range [][]clientv3.OpOption{
		{clientv3.WithPrefix()},
		{clientv3.WithPrefix(), clientv3.WithLimit(33)},
		{clientv3.WithPrefix(), clientv3.WithRev(old), clientv3.WithKeysOnly()},
	} {
		var outs [2]string
		for i, s := range sides {
			ch, err := s.c.GetStream(ctx, "s/", opts...)
			if err == nil {
				var resp *clientv3.GetResponse
				if resp, err = clientv3.GetStreamToGetResponse(ch); err == nil {
					outs[i] = normalize(s, (*pb.RangeResponse)(resp))
				}
			}
			if err != nil {
				outs[i] = errText(err)
			}
		}
		if outs[0] != outs[1] {
			t.Errorf("GetStream with %d options:\netcd:  %s\njanus: %s", len(opts), outs[0], outs[1])
		}
	}

	// etcdctl, as its users see it.
	bin := testenv.EtcdctlPath(t)
	for _, args := range [][]string{
		{"get", "s/", "--prefix", "--stream"},
		{"get", "s/", "--prefix", "--stream", "--limit", "17"},
		{"get", "s/", "--prefix", "--stream", "--keys-only"},
		{"get", "s/", "--prefix", "--stream", "--count-only", "-w", "simple"},
		{"get", "s/", "--prefix", "--stream", "--rev", fmt.Sprint(old)},
		{"get", "s/", "--prefix", "--stream", "--rev", fmt.Sprint(compacted)},
		{"get", "", "--from-key", "--stream", "--keys-only"},
	} {
		var outs [2]string
		for i, ep := range endpoints {
			cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoints", ep, "--command-timeout", "30s"}, args...)...)
			out, err := cmd.CombinedOutput()
			outs[i] = fmt.Sprintf("%s(exit: %v)", out, err)
		}
		if outs[0] != outs[1] {
			t.Errorf("etcdctl %s:\netcd:\n%.2000s\njanus:\n%.2000s", strings.Join(args, " "), outs[0], outs[1])
		}
	}
}

// rangeStreamText runs one RangeStream and renders every chunk, or the
// error that ended the stream: chunk boundaries are part of the answer.
func rangeStreamText(ctx context.Context, s *side, req *pb.RangeRequest) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewKVClient(s.c.ActiveConnection()).RangeStream(ctx, req)
	if err != nil {
		return errText(err)
	}
	var b strings.Builder
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			return b.String() + errText(err)
		}
		r := resp.RangeResponse
		fmt.Fprintf(&b, "chunk of %d: ", len(r.Kvs))
		for _, kv := range r.Kvs {
			if len(kv.Value) > 64 {
				kv.Value = []byte(fmt.Sprintf("(%d bytes)", len(kv.Value)))
			}
		}
		b.WriteString(normalize(s, r))
		b.WriteByte('\n')
	}
}
