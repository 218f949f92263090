package etcdapi

import (
	"context"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/januskv/janus/core"
)

// clientv3 decides whether to retry, and what to tell the user, from the
// exact status of these errors.
func TestGRPCErrorMapsBackendErrors(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{fmt.Errorf("propose: %w", core.ErrNoLeader), rpctypes.ErrGRPCNoLeader},
		{fmt.Errorf("propose: %w", core.ErrLeaderChanged), rpctypes.ErrGRPCLeaderChanged},
		{core.ErrCompacted, rpctypes.ErrGRPCCompacted},
		{core.ErrFutureRev, rpctypes.ErrGRPCFutureRev},
		{&core.Error{Code: core.CodeLeaseNotFound}, rpctypes.ErrGRPCLeaseNotFound},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), rpctypes.ErrGRPCDeadlineExceeded},
		// Storage limits: all InvalidArgument, as etcd's own are.
		{&core.Error{Code: core.CodeKeyTooLong}, errGRPCKeyTooLong},
		{&core.Error{Code: core.CodeTooLarge}, rpctypes.ErrGRPCRequestTooLarge},
		{fmt.Errorf("propose: %w: entry too large", &core.Error{Code: core.CodeTooLarge}), rpctypes.ErrGRPCRequestTooLarge},
		{&core.Error{Code: core.CodeTooDeep}, rpctypes.ErrGRPCTooManyOps},
		{&core.Error{Code: core.CodeBadArguments}, errGRPCBadRequest},
	}
	for _, c := range cases {
		if got := grpcError(c.err); got != c.want {
			t.Errorf("grpcError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
