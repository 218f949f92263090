package etcdapi_test

import (
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/server"
)

// TestRefusals checks that bad requests get etcd's own code and message,
// which clientv3 turns back into rpctypes' errors.
func TestRefusals(t *testing.T) {
	j := startJanus(t, func(_ *server.MemberConfig, c *etcdapi.Config) { c.MaxRequestBytes = 64 * 1024 })
	ctx := testCtx(t)
	kv := clientv3.NewKV(j.Client)
	for i := range 3 {
		if _, err := kv.Put(ctx, "k", strings.Repeat("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Client.Compact(ctx, 3); err != nil {
		t.Fatal(err)
	}
	manyOps := make([]clientv3.Op, 129)
	for i := range manyOps {
		manyOps[i] = clientv3.OpGet("k")
	}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"empty key put", func() error { _, err := kv.Put(ctx, "", "v"); return err }, rpctypes.ErrEmptyKey},
		{"empty key get", func() error { _, err := kv.Get(ctx, ""); return err }, rpctypes.ErrEmptyKey},
		{"empty key delete", func() error { _, err := kv.Delete(ctx, ""); return err }, rpctypes.ErrEmptyKey},
		{"too large", func() error { _, err := kv.Put(ctx, "big", strings.Repeat("x", 65*1024)); return err }, rpctypes.ErrRequestTooLarge},
		{"too many ops", func() error { _, err := kv.Txn(ctx).Then(manyOps...).Commit(); return err }, rpctypes.ErrTooManyOps},
		{"duplicate put", func() error {
			_, err := kv.Txn(ctx).Then(clientv3.OpPut("d", "1"), clientv3.OpPut("d", "2")).Commit()
			return err
		}, rpctypes.ErrDuplicateKey},
		{"put and delete", func() error {
			_, err := kv.Txn(ctx).Then(clientv3.OpPut("d", "1"), clientv3.OpDelete("a", clientv3.WithRange("z"))).Commit()
			return err
		}, rpctypes.ErrDuplicateKey},
		{"duplicate in nested branch that will not run", func() error {
			nested := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Version("nope"), "=", 7)}, nil, []clientv3.Op{clientv3.OpPut("d", "x")})
			_, err := kv.Txn(ctx).Then(clientv3.OpPut("d", "1"), nested).Commit()
			return err
		}, rpctypes.ErrDuplicateKey},
		{"compacted", func() error { _, err := kv.Get(ctx, "k", clientv3.WithRev(2)); return err }, rpctypes.ErrCompacted},
		{"future", func() error { _, err := kv.Get(ctx, "k", clientv3.WithRev(100)); return err }, rpctypes.ErrFutureRev},
		{"compact again", func() error { _, err := j.Client.Compact(ctx, 2); return err }, rpctypes.ErrCompacted},
		{"compact future", func() error { _, err := j.Client.Compact(ctx, 100); return err }, rpctypes.ErrFutureRev},
		{"unknown lease put", func() error { _, err := kv.Put(ctx, "l", "v", clientv3.WithLease(12345)); return err }, rpctypes.ErrLeaseNotFound},
		{"unknown lease revoke", func() error { _, err := j.Client.Revoke(ctx, 12345); return err }, rpctypes.ErrLeaseNotFound},
		{"ignore value on missing key", func() error { _, err := kv.Put(ctx, "missing", "", clientv3.WithIgnoreValue()); return err }, rpctypes.ErrKeyNotFound},
		{"ignore value with value", func() error { _, err := kv.Put(ctx, "k", "v", clientv3.WithIgnoreValue()); return err }, rpctypes.ErrValueProvided},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got success, want %v", tt.want)
			}
			if rpctypes.Error(err).Error() != tt.want.Error() {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			got, ok := rpctypes.Error(err).(rpctypes.EtcdError)
			if want := tt.want.(rpctypes.EtcdError); !ok || got.Code() != want.Code() {
				t.Fatalf("error %v (code %v), want code %v", err, status.Code(err), want.Code())
			}
		})
	}
}
