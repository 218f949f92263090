package etcdapi

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/januskv/janus/core"
)

// The checks below refuse what etcd refuses before a request reaches its
// log, with the same errors and in the same order, so clients that match
// errors by message behave the same.

func checkRange(r *pb.RangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	return nil
}

func checkPut(r *pb.PutRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if r.IgnoreValue && len(r.Value) != 0 {
		return rpctypes.ErrGRPCValueProvided
	}
	if r.IgnoreLease && r.Lease != 0 {
		return rpctypes.ErrGRPCLeaseProvided
	}
	return nil
}

func checkDelete(r *pb.DeleteRangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	return nil
}

// checkTxn applies etcd's op limit: the largest of the compare, success
// and failure lists may not exceed maxOps, and nested Txns get what the
// outer one left over.
func checkTxn(r *pb.TxnRequest, maxOps int) error {
	n := max(len(r.Compare), len(r.Success), len(r.Failure))
	if n > maxOps {
		return rpctypes.ErrGRPCTooManyOps
	}
	for _, c := range r.Compare {
		if len(c.Key) == 0 {
			return rpctypes.ErrGRPCEmptyKey
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if err := checkRequestOp(op, maxOps-n); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkRequestOp(op *pb.RequestOp, maxOps int) error {
	switch v := op.GetRequest().(type) {
	case *pb.RequestOp_RequestRange:
		return checkRange(v.RequestRange)
	case *pb.RequestOp_RequestPut:
		return checkPut(v.RequestPut)
	case *pb.RequestOp_RequestDeleteRange:
		return checkDelete(v.RequestDeleteRange)
	case *pb.RequestOp_RequestTxn:
		return checkTxn(v.RequestTxn, maxOps)
	}
	// An empty RequestOp: etcd answers this, oddly, with key not found.
	return rpctypes.ErrGRPCKeyNotFound
}

// interval is a key range as etcd's duplicate check sees it: an empty end
// is unbounded, and a single key k is [k, k+"\x00").
type interval struct{ begin, end string }

func point(k string) interval { return interval{k, k + "\x00"} }

// holds reports whether the point key k lies in iv. A delete whose range
// end is "\x00" (every key from key on) holds no key here, as in etcd,
// whose interval tree reads that end literally.
func (iv interval) holds(k string) bool {
	return iv.begin <= k && (iv.end == "" || k < iv.end)
}

type intervals []interval

func (ivs intervals) hold(k string) bool {
	for _, iv := range ivs {
		if iv.holds(k) {
			return true
		}
	}
	return false
}

// checkDuplicates refuses a Txn branch in which a key is put twice, or put
// and deleted, counting nested Txns and both of their branches (a key put
// in both branches of one nested Txn is fine: only one runs). Deleting a
// key twice is allowed.
func checkDuplicates(ops []*pb.RequestOp) (map[string]struct{}, intervals, error) {
	var dels intervals
	for _, op := range ops {
		if d := op.GetRequestDeleteRange(); d != nil {
			if len(d.RangeEnd) != 0 {
				dels = append(dels, interval{string(d.Key), string(d.RangeEnd)})
			} else {
				dels = append(dels, point(string(d.Key)))
			}
		}
	}
	puts := map[string]struct{}{}
	for _, op := range ops {
		t := op.GetRequestTxn()
		if t == nil {
			continue
		}
		putsThen, delsThen, err := checkDuplicates(t.Success)
		if err != nil {
			return nil, nil, err
		}
		putsElse, delsElse, err := checkDuplicates(t.Failure)
		if err != nil {
			return nil, nil, err
		}
		for k := range putsThen {
			if _, dup := puts[k]; dup || dels.hold(k) {
				return nil, nil, rpctypes.ErrGRPCDuplicateKey
			}
			puts[k] = struct{}{}
		}
		for k := range putsElse {
			if _, dup := puts[k]; dup {
				if _, sameTxn := putsThen[k]; !sameTxn {
					return nil, nil, rpctypes.ErrGRPCDuplicateKey
				}
			}
			if dels.hold(k) {
				return nil, nil, rpctypes.ErrGRPCDuplicateKey
			}
			puts[k] = struct{}{}
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}
	for _, op := range ops {
		p := op.GetRequestPut()
		if p == nil {
			continue
		}
		k := string(p.Key)
		if _, dup := puts[k]; dup || dels.hold(k) {
			return nil, nil, rpctypes.ErrGRPCDuplicateKey
		}
		puts[k] = struct{}{}
	}
	return puts, dels, nil
}

// Janus's own refusals, for limits etcd does not have, worded as etcd's.
var (
	errGRPCKeyTooLong = status.Error(codes.InvalidArgument,
		fmt.Sprintf("etcdserver: key is too long (Janus stores keys of up to %d bytes)", core.MaxKeyBytes))
	errGRPCBadRequest = status.Error(codes.InvalidArgument, "etcdserver: malformed request")
)

// grpcError maps an error from the backend to the etcd error clients
// expect.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ce *core.Error
	code := core.Code(0xff)
	if errors.As(err, &ce) {
		code = ce.Code
	}
	if e, ok := authErrors[code]; ok {
		return e
	}
	switch code {
	case core.CodeCompacted:
		return rpctypes.ErrGRPCCompacted
	case core.CodeFutureRev:
		return rpctypes.ErrGRPCFutureRev
	case core.CodeLeaseNotFound:
		return rpctypes.ErrGRPCLeaseNotFound
	case core.CodeLeaseExists:
		return rpctypes.ErrGRPCLeaseExist
	case core.CodeKeyNotFound:
		return rpctypes.ErrGRPCKeyNotFound
	case core.CodeKeyTooLong:
		// etcd itself takes any key a request can carry; Janus's
		// store cannot, and says so in etcd's style.
		return errGRPCKeyTooLong
	case core.CodeTooLarge:
		return rpctypes.ErrGRPCRequestTooLarge
	case core.CodeTooDeep:
		// etcd bounds nesting only through max-txn-ops.
		return rpctypes.ErrGRPCTooManyOps
	case core.CodeBadArguments:
		return errGRPCBadRequest
	case core.CodeNoSpace:
		return rpctypes.ErrGRPCNoSpace
	}
	switch {
	case errors.Is(err, context.Canceled):
		return rpctypes.ErrGRPCCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return rpctypes.ErrGRPCDeadlineExceeded
	case errors.Is(err, core.ErrHubClosed), errors.Is(err, core.ErrStopped):
		return rpctypes.ErrGRPCStopped
	case errors.Is(err, core.ErrNoLeader):
		return rpctypes.ErrGRPCNoLeader
	case errors.Is(err, core.ErrLeaderChanged):
		return rpctypes.ErrGRPCLeaderChanged
	case errors.Is(err, core.ErrCorrupt):
		return rpctypes.ErrGRPCCorrupt
	}
	return status.Error(codes.Unknown, err.Error())
}
