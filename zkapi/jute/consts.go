package jute

import "strconv"

// OpCode is a request type (ZooDefs.OpCode).
type OpCode int32

// OpCodes as ZooKeeper 3.8 numbers them.
const (
	OpNotification         OpCode = 0
	OpCreate               OpCode = 1
	OpDelete               OpCode = 2
	OpExists               OpCode = 3
	OpGetData              OpCode = 4
	OpSetData              OpCode = 5
	OpGetACL               OpCode = 6
	OpSetACL               OpCode = 7
	OpGetChildren          OpCode = 8
	OpSync                 OpCode = 9
	OpPing                 OpCode = 11
	OpGetChildren2         OpCode = 12
	OpCheck                OpCode = 13
	OpMulti                OpCode = 14
	OpCreate2              OpCode = 15
	OpReconfig             OpCode = 16
	OpCheckWatches         OpCode = 17
	OpRemoveWatches        OpCode = 18
	OpCreateContainer      OpCode = 19
	OpDeleteContainer      OpCode = 20
	OpCreateTTL            OpCode = 21
	OpMultiRead            OpCode = 22
	OpAuth                 OpCode = 100
	OpSetWatches           OpCode = 101
	OpSASL                 OpCode = 102
	OpGetEphemerals        OpCode = 103
	OpGetAllChildrenNumber OpCode = 104
	OpSetWatches2          OpCode = 105
	OpAddWatch             OpCode = 106
	OpWhoAmI               OpCode = 107
	OpCreateSession        OpCode = -10
	OpCloseSession         OpCode = -11
	OpError                OpCode = -1
)

var opNames = map[OpCode]string{
	OpNotification:         "notification",
	OpCreate:               "create",
	OpDelete:               "delete",
	OpExists:               "exists",
	OpGetData:              "getData",
	OpSetData:              "setData",
	OpGetACL:               "getACL",
	OpSetACL:               "setACL",
	OpGetChildren:          "getChildren",
	OpSync:                 "sync",
	OpPing:                 "ping",
	OpGetChildren2:         "getChildren2",
	OpCheck:                "check",
	OpMulti:                "multi",
	OpCreate2:              "create2",
	OpReconfig:             "reconfig",
	OpCheckWatches:         "checkWatches",
	OpRemoveWatches:        "removeWatches",
	OpCreateContainer:      "createContainer",
	OpDeleteContainer:      "deleteContainer",
	OpCreateTTL:            "createTtl", // sic: Request.op2String spells it so
	OpMultiRead:            "multiRead",
	OpAuth:                 "auth",
	OpSetWatches:           "setWatches",
	OpSASL:                 "sasl",
	OpGetEphemerals:        "getEphemerals",
	OpGetAllChildrenNumber: "getAllChildrenNumber",
	OpSetWatches2:          "setWatches2",
	OpAddWatch:             "addWatch", // op2String in 3.8 has no case for it
	OpWhoAmI:               "whoAmI",
	OpCreateSession:        "createSession",
	OpCloseSession:         "closeSession",
	OpError:                "error",
}

// String returns the name ZooKeeper's Request.op2String gives the opcode.
func (op OpCode) String() string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return "unknown " + strconv.Itoa(int(op))
}

// Code is a ZooKeeper error code (KeeperException.Code).
type Code int32

// Error codes as ZooKeeper 3.8 numbers them.
const (
	CodeOk                           Code = 0
	CodeSystemError                  Code = -1
	CodeRuntimeInconsistency         Code = -2
	CodeDataInconsistency            Code = -3
	CodeConnectionLoss               Code = -4
	CodeMarshallingError             Code = -5
	CodeUnimplemented                Code = -6
	CodeOperationTimeout             Code = -7
	CodeBadArguments                 Code = -8
	CodeUnknownSession               Code = -12
	CodeNewConfigNoQuorum            Code = -13
	CodeReconfigInProgress           Code = -14
	CodeAPIError                     Code = -100
	CodeNoNode                       Code = -101
	CodeNoAuth                       Code = -102
	CodeBadVersion                   Code = -103
	CodeNoChildrenForEphemerals      Code = -108
	CodeNodeExists                   Code = -110
	CodeNotEmpty                     Code = -111
	CodeSessionExpired               Code = -112
	CodeInvalidCallback              Code = -113
	CodeInvalidACL                   Code = -114
	CodeAuthFailed                   Code = -115
	CodeSessionMoved                 Code = -118
	CodeNotReadOnly                  Code = -119
	CodeEphemeralOnLocalSession      Code = -120
	CodeNoWatcher                    Code = -121
	CodeRequestTimeout               Code = -122
	CodeReconfigDisabled             Code = -123
	CodeSessionClosedRequireSaslAuth Code = -124
	CodeQuotaExceeded                Code = -125
	CodeThrottledOp                  Code = -127
)

// codeNames are the names of KeeperException.Code's int constants (the
// enum constants are the same words upper-cased).
var codeNames = map[Code]string{
	CodeOk:                           "Ok",
	CodeSystemError:                  "SystemError",
	CodeRuntimeInconsistency:         "RuntimeInconsistency",
	CodeDataInconsistency:            "DataInconsistency",
	CodeConnectionLoss:               "ConnectionLoss",
	CodeMarshallingError:             "MarshallingError",
	CodeUnimplemented:                "Unimplemented",
	CodeOperationTimeout:             "OperationTimeout",
	CodeBadArguments:                 "BadArguments",
	CodeUnknownSession:               "UnknownSession",
	CodeNewConfigNoQuorum:            "NewConfigNoQuorum",
	CodeReconfigInProgress:           "ReconfigInProgress",
	CodeAPIError:                     "APIError",
	CodeNoNode:                       "NoNode",
	CodeNoAuth:                       "NoAuth",
	CodeBadVersion:                   "BadVersion",
	CodeNoChildrenForEphemerals:      "NoChildrenForEphemerals",
	CodeNodeExists:                   "NodeExists",
	CodeNotEmpty:                     "NotEmpty",
	CodeSessionExpired:               "SessionExpired",
	CodeInvalidCallback:              "InvalidCallback",
	CodeInvalidACL:                   "InvalidACL",
	CodeAuthFailed:                   "AuthFailed",
	CodeSessionMoved:                 "SessionMoved",
	CodeNotReadOnly:                  "NotReadOnly",
	CodeEphemeralOnLocalSession:      "EphemeralOnLocalSession",
	CodeNoWatcher:                    "NoWatcher",
	CodeRequestTimeout:               "RequestTimeout",
	CodeReconfigDisabled:             "ReconfigDisabled",
	CodeSessionClosedRequireSaslAuth: "SessionClosedRequireSaslAuth",
	CodeQuotaExceeded:                "QuotaExceeded",
	CodeThrottledOp:                  "ThrottledOp",
}

// String returns the code's name in KeeperException.Code ("NoNode").
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// codeMessages are KeeperException.getCodeMessage's texts where they differ
// from the code's name.
var codeMessages = map[Code]string{
	CodeOk:                           "ok",
	CodeNotEmpty:                     "Directory not empty",
	CodeSessionExpired:               "Session expired",
	CodeInvalidCallback:              "Invalid callback",
	CodeSessionMoved:                 "Session moved",
	CodeNotReadOnly:                  "Not a read-only call",
	CodeEphemeralOnLocalSession:      "Ephemeral node on local session",
	CodeNoWatcher:                    "No such watcher",
	CodeReconfigDisabled:             "Reconfig is disabled",
	CodeSessionClosedRequireSaslAuth: "Session closed because client failed to authenticate",
	CodeQuotaExceeded:                "Quota has exceeded",
	CodeThrottledOp:                  "Op throttled due to high load",
}

// Message returns the text a Java client's KeeperException shows for the
// code ("KeeperErrorCode = " + Message()), for logs that should read like
// ZooKeeper's.
func (c Code) Message() string {
	if s, ok := codeMessages[c]; ok {
		return s
	}
	if s, ok := codeNames[c]; ok {
		switch c {
		case CodeUnknownSession, CodeRequestTimeout:
			// getCodeMessage has no case for these and falls to its default.
			return "Unknown error " + upper(s)
		}
		return s
	}
	return "Unknown error " + strconv.Itoa(int(c))
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// EventType is a watch event's type (Watcher.Event.EventType).
type EventType int32

// Event types.
const (
	EventNone                   EventType = -1
	EventNodeCreated            EventType = 1
	EventNodeDeleted            EventType = 2
	EventNodeDataChanged        EventType = 3
	EventNodeChildrenChanged    EventType = 4
	EventDataWatchRemoved       EventType = 5
	EventChildWatchRemoved      EventType = 6
	EventPersistentWatchRemoved EventType = 7
)

func (t EventType) String() string {
	switch t {
	case EventNone:
		return "None"
	case EventNodeCreated:
		return "NodeCreated"
	case EventNodeDeleted:
		return "NodeDeleted"
	case EventNodeDataChanged:
		return "NodeDataChanged"
	case EventNodeChildrenChanged:
		return "NodeChildrenChanged"
	case EventDataWatchRemoved:
		return "DataWatchRemoved"
	case EventChildWatchRemoved:
		return "ChildWatchRemoved"
	case EventPersistentWatchRemoved:
		return "PersistentWatchRemoved"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// KeeperState is a client connection state carried in watch events
// (Watcher.Event.KeeperState). The server only ever sends SyncConnected in
// node events; the others are client-side.
type KeeperState int32

// Keeper states.
const (
	StateUnknown           KeeperState = -1
	StateDisconnected      KeeperState = 0
	StateNoSyncConnected   KeeperState = 1
	StateSyncConnected     KeeperState = 3
	StateAuthFailed        KeeperState = 4
	StateConnectedReadOnly KeeperState = 5
	StateSaslAuthenticated KeeperState = 6
	StateExpired           KeeperState = -112
	StateClosed            KeeperState = 7
)

func (s KeeperState) String() string {
	switch s {
	case StateUnknown:
		return "Unknown"
	case StateDisconnected:
		return "Disconnected"
	case StateNoSyncConnected:
		return "NoSyncConnected"
	case StateSyncConnected:
		return "SyncConnected"
	case StateAuthFailed:
		return "AuthFailed"
	case StateConnectedReadOnly:
		return "ConnectedReadOnly"
	case StateSaslAuthenticated:
		return "SaslAuthenticated"
	case StateExpired:
		return "Expired"
	case StateClosed:
		return "Closed"
	}
	return "KeeperState(" + strconv.Itoa(int(s)) + ")"
}

// Perms are ACL permission bits (ZooDefs.Perms).
const (
	PermRead   int32 = 1 << 0
	PermWrite  int32 = 1 << 1
	PermCreate int32 = 1 << 2
	PermDelete int32 = 1 << 3
	PermAdmin  int32 = 1 << 4
	PermAll          = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// CreateMode is the flags field of a create request (CreateMode).
type CreateMode int32

// Create modes.
const (
	ModePersistent                  CreateMode = 0
	ModeEphemeral                   CreateMode = 1
	ModePersistentSequential        CreateMode = 2
	ModeEphemeralSequential         CreateMode = 3
	ModeContainer                   CreateMode = 4
	ModePersistentWithTTL           CreateMode = 5
	ModePersistentSequentialWithTTL CreateMode = 6
)

// Valid reports whether ZooKeeper's CreateMode.fromFlag accepts m; for
// others ZooKeeper answers BadArguments.
func (m CreateMode) Valid() bool { return m >= ModePersistent && m <= ModePersistentSequentialWithTTL }

// Ephemeral reports whether nodes of mode m end with their session.
func (m CreateMode) Ephemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// Sequential reports whether mode m appends a sequence number to the name.
func (m CreateMode) Sequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential || m == ModePersistentSequentialWithTTL
}

// Container reports whether m is CONTAINER.
func (m CreateMode) Container() bool { return m == ModeContainer }

// TTL reports whether nodes of mode m expire after a time to live.
func (m CreateMode) TTL() bool {
	return m == ModePersistentWithTTL || m == ModePersistentSequentialWithTTL
}

func (m CreateMode) String() string {
	switch m {
	case ModePersistent:
		return "PERSISTENT"
	case ModeEphemeral:
		return "EPHEMERAL"
	case ModePersistentSequential:
		return "PERSISTENT_SEQUENTIAL"
	case ModeEphemeralSequential:
		return "EPHEMERAL_SEQUENTIAL"
	case ModeContainer:
		return "CONTAINER"
	case ModePersistentWithTTL:
		return "PERSISTENT_WITH_TTL"
	case ModePersistentSequentialWithTTL:
		return "PERSISTENT_SEQUENTIAL_WITH_TTL"
	}
	return "CreateMode(" + strconv.Itoa(int(m)) + ")"
}

// AddWatchMode is the mode of an addWatch request (ZooDefs.AddWatchModes).
type AddWatchMode int32

// AddWatch modes.
const (
	AddWatchPersistent          AddWatchMode = 0
	AddWatchPersistentRecursive AddWatchMode = 1
)

func (m AddWatchMode) String() string {
	switch m {
	case AddWatchPersistent:
		return "PERSISTENT"
	case AddWatchPersistentRecursive:
		return "PERSISTENT_RECURSIVE"
	}
	return "AddWatchMode(" + strconv.Itoa(int(m)) + ")"
}

// WatcherType selects the watches a checkWatches or removeWatches request
// names (Watcher.WatcherType).
type WatcherType int32

// Watcher types.
const (
	WatcherChildren WatcherType = 1
	WatcherData     WatcherType = 2
	WatcherAny      WatcherType = 3
)

func (t WatcherType) String() string {
	switch t {
	case WatcherChildren:
		return "Children"
	case WatcherData:
		return "Data"
	case WatcherAny:
		return "Any"
	}
	return "WatcherType(" + strconv.Itoa(int(t)) + ")"
}

// Xids with a fixed meaning (ClientCnxn). Ordinary requests use positive,
// increasing xids chosen by the client.
const (
	XidNotification int32 = -1 // server to client: a WatcherEvent follows
	XidPing         int32 = -2 // ping request and its reply
	XidAuth         int32 = -4 // AuthPacket request and its reply
	XidSetWatches   int32 = -8 // setWatches/setWatches2 on reconnect
)

// ProtocolVersion is the only protocolVersion clients send and servers
// answer in the connect handshake.
const ProtocolVersion int32 = 0
