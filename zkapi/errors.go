package zkapi

import (
	"errors"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// errBackend marks a failure that is not a refusal by the state machine (the
// member is stopping, the log is unavailable): ZooKeeper would drop the
// connection, and so does the server, letting the client retry elsewhere.
var errBackend = errors.New("zkapi: backend unavailable")

// codeOf maps a state-machine refusal to the ZooKeeper error code the same
// input gets from ZooKeeper.
func codeOf(err error) jute.Code {
	// A refusal made before proposing (too large for the log, NOSPACE)
	// comes wrapped in the member's context.
	var ce *core.Error
	if errors.As(err, &ce) {
		err = ce
	}
	switch core.CodeOf(err) {
	case core.CodeOK:
		return jute.CodeOk
	case core.CodeNoNode:
		return jute.CodeNoNode
	case core.CodeNodeExists:
		return jute.CodeNodeExists
	case core.CodeBadVersion:
		return jute.CodeBadVersion
	case core.CodeNotEmpty:
		return jute.CodeNotEmpty
	case core.CodeNoChildrenForEphemerals:
		return jute.CodeNoChildrenForEphemerals
	case core.CodeNoAuth:
		return jute.CodeNoAuth
	case core.CodeInvalidACL:
		return jute.CodeInvalidACL
	case core.CodeBadArguments, core.CodeKeyTooLong, core.CodeTooLarge, core.CodeTooDeep:
		// Janus's storage limits have no code of their own in
		// ZooKeeper; a path it cannot take is a bad argument.
		return jute.CodeBadArguments
	case core.CodeSessionExpired, core.CodeLeaseNotFound:
		return jute.CodeSessionExpired
	case core.CodeNoSpace:
		// ZooKeeper has no code for a full store (on a full disk it
		// exits). SystemError is one every client raises at once and
		// keeps the session through: Curator throws
		// SystemErrorException without retrying, kazoo raises
		// SystemZookeeperError. QuotaExceeded (-125) is unknown to
		// kazoo 2.8, whose reader thread then fails and drops the
		// session; ConnectionLoss would drop the reads with the write
		// and have Curator retry the write in a loop.
		return jute.CodeSystemError
	}
	return jute.CodeSystemError
}

// isRefusal reports whether err came from the state machine (a deterministic
// answer to send the client) rather than from the member failing.
func isRefusal(err error) bool {
	var ce *core.Error
	return errors.As(err, &ce)
}
