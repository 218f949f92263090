package core

import "fmt"

// Code classifies why an op was refused. The faces map codes to their own
// protocol's errors (see package translate).
type Code uint8

const (
	CodeOK Code = iota
	CodeNoNode
	CodeNodeExists
	CodeBadVersion
	CodeNotEmpty
	CodeNoChildrenForEphemerals
	CodeNoAuth
	CodeInvalidACL
	CodeBadArguments
	CodeLeaseNotFound
	CodeLeaseExists
	CodeKeyNotFound // etcd put with ignore_value/ignore_lease on a missing key
	CodeCompacted
	CodeFutureRev
	CodeSessionExpired // ephemeral create for a session that does not exist
	// Storage limits (see limits.go): the op could not be stored whatever
	// the state, or the state it would leave could not.
	CodeKeyTooLong // a key or path over MaxKeyBytes
	CodeTooLarge   // a record over MaxRecordBytes
	CodeTooDeep    // Txns nested over MaxTxnDepth
	// CodeNoSpace: a NOSPACE alarm is active and the op would grow the
	// state (see CheckSpace).
	CodeNoSpace
	// etcd auth store refusals (see auth.go), one per etcd error.
	CodeAuthOldRevision
	CodeAuthUserEmpty
	CodeAuthUserExists
	CodeAuthUserNotFound
	CodeAuthRoleEmpty
	CodeAuthRoleExists
	CodeAuthRoleNotFound
	CodeAuthRootUserNotExist
	CodeAuthRootRoleNotExist
	CodeAuthRoleNotGranted
	CodeAuthPermissionNotGranted
	CodeAuthInvalidMgmt
	CodeAuthPermissionDenied
)

var codeNames = [...]string{
	CodeOK:                       "ok",
	CodeNoNode:                   "no node",
	CodeNodeExists:               "node exists",
	CodeBadVersion:               "bad version",
	CodeNotEmpty:                 "not empty",
	CodeNoChildrenForEphemerals:  "no children for ephemerals",
	CodeNoAuth:                   "not authorized",
	CodeInvalidACL:               "invalid ACL",
	CodeBadArguments:             "bad arguments",
	CodeLeaseNotFound:            "lease not found",
	CodeLeaseExists:              "lease already exists",
	CodeKeyNotFound:              "key not found",
	CodeCompacted:                "revision has been compacted",
	CodeFutureRev:                "revision is a future revision",
	CodeSessionExpired:           "session expired",
	CodeKeyTooLong:               "key is too long",
	CodeTooLarge:                 "request is too large",
	CodeTooDeep:                  "transactions nested too deeply",
	CodeNoSpace:                  "database space exceeded",
	CodeAuthOldRevision:          "auth revision is old",
	CodeAuthUserEmpty:            "user name is empty",
	CodeAuthUserExists:           "user already exists",
	CodeAuthUserNotFound:         "user not found",
	CodeAuthRoleEmpty:            "role name is empty",
	CodeAuthRoleExists:           "role already exists",
	CodeAuthRoleNotFound:         "role not found",
	CodeAuthRootUserNotExist:     "root user does not exist",
	CodeAuthRootRoleNotExist:     "root user does not have root role",
	CodeAuthRoleNotGranted:       "role is not granted to the user",
	CodeAuthPermissionNotGranted: "permission is not granted to the role",
	CodeAuthInvalidMgmt:          "invalid auth management",
	CodeAuthPermissionDenied:     "permission denied",
}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// Error is a refusal by the state machine: deterministic, and the same on
// every replica.
type Error struct {
	Code Code
	Key  []byte
}

func (e *Error) Error() string {
	if len(e.Key) == 0 {
		return "core: " + e.Code.String()
	}
	return fmt.Sprintf("core: %s: %q", e.Code, e.Key)
}

// Is lets errors.Is match on the code alone: errors.Is(err, &Error{Code: CodeNoNode}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Key == nil || string(t.Key) == string(e.Key))
}

// CodeOf returns the Code of err, CodeOK for nil, and 0xff for errors that
// did not come from the state machine.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	if e, ok := err.(*Error); ok {
		return e.Code
	}
	return 0xff
}

// IsRefusal reports whether err, from Apply's ops or from a check it shares
// with the faces (ZKTarget, CheckRangeACL), is a refusal: a bare *Error,
// which the state machine decides alike on every replica. Any other error
// is a failure to read the state. A View never returns a bare *Error (see
// View), so a read failure is never taken for a refusal.
func IsRefusal(err error) bool {
	_, ok := err.(*Error)
	return ok
}

func errCode(c Code, key []byte) error { return &Error{Code: c, Key: key} }

// Sentinel errors for reads.
var (
	ErrCompacted = &Error{Code: CodeCompacted}
	ErrFutureRev = &Error{Code: CodeFutureRev}
)
