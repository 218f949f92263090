package jute

import (
	"fmt"
	"testing"
)

// The numbers below are copied from ZooKeeper 3.8's ZooDefs.OpCode,
// KeeperException.Code, Watcher.Event and CreateMode, so that an edit to a
// constant that drifts from ZooKeeper fails here.

func TestOpCodes(t *testing.T) {
	tests := []struct {
		op   OpCode
		num  int32
		name string
	}{
		{OpNotification, 0, "notification"}, {OpCreate, 1, "create"}, {OpDelete, 2, "delete"},
		{OpExists, 3, "exists"}, {OpGetData, 4, "getData"}, {OpSetData, 5, "setData"},
		{OpGetACL, 6, "getACL"}, {OpSetACL, 7, "setACL"}, {OpGetChildren, 8, "getChildren"},
		{OpSync, 9, "sync"}, {OpPing, 11, "ping"}, {OpGetChildren2, 12, "getChildren2"},
		{OpCheck, 13, "check"}, {OpMulti, 14, "multi"}, {OpCreate2, 15, "create2"},
		{OpReconfig, 16, "reconfig"}, {OpCheckWatches, 17, "checkWatches"},
		{OpRemoveWatches, 18, "removeWatches"}, {OpCreateContainer, 19, "createContainer"},
		{OpDeleteContainer, 20, "deleteContainer"}, {OpCreateTTL, 21, "createTtl"},
		{OpMultiRead, 22, "multiRead"}, {OpAuth, 100, "auth"}, {OpSetWatches, 101, "setWatches"},
		{OpSASL, 102, "sasl"}, {OpGetEphemerals, 103, "getEphemerals"},
		{OpGetAllChildrenNumber, 104, "getAllChildrenNumber"}, {OpSetWatches2, 105, "setWatches2"},
		{OpAddWatch, 106, "addWatch"}, {OpWhoAmI, 107, "whoAmI"},
		{OpCreateSession, -10, "createSession"}, {OpCloseSession, -11, "closeSession"},
		{OpError, -1, "error"}, {10, 10, "unknown 10"},
	}
	for _, tc := range tests {
		if int32(tc.op) != tc.num || tc.op.String() != tc.name {
			t.Errorf("OpCode %d %q, want %d %q", int32(tc.op), tc.op, tc.num, tc.name)
		}
	}
	if len(opNames) != len(tests)-1 {
		t.Errorf("%d named opcodes, %d tested", len(opNames), len(tests)-1)
	}
}

func TestCodes(t *testing.T) {
	tests := []struct {
		code    Code
		num     int32
		name    string
		message string
	}{
		{CodeOk, 0, "Ok", "ok"},
		{CodeSystemError, -1, "SystemError", "SystemError"},
		{CodeRuntimeInconsistency, -2, "RuntimeInconsistency", "RuntimeInconsistency"},
		{CodeDataInconsistency, -3, "DataInconsistency", "DataInconsistency"},
		{CodeConnectionLoss, -4, "ConnectionLoss", "ConnectionLoss"},
		{CodeMarshallingError, -5, "MarshallingError", "MarshallingError"},
		{CodeUnimplemented, -6, "Unimplemented", "Unimplemented"},
		{CodeOperationTimeout, -7, "OperationTimeout", "OperationTimeout"},
		{CodeBadArguments, -8, "BadArguments", "BadArguments"},
		{CodeUnknownSession, -12, "UnknownSession", "Unknown error UNKNOWNSESSION"},
		{CodeNewConfigNoQuorum, -13, "NewConfigNoQuorum", "NewConfigNoQuorum"},
		{CodeReconfigInProgress, -14, "ReconfigInProgress", "ReconfigInProgress"},
		{CodeAPIError, -100, "APIError", "APIError"},
		{CodeNoNode, -101, "NoNode", "NoNode"},
		{CodeNoAuth, -102, "NoAuth", "NoAuth"},
		{CodeBadVersion, -103, "BadVersion", "BadVersion"},
		{CodeNoChildrenForEphemerals, -108, "NoChildrenForEphemerals", "NoChildrenForEphemerals"},
		{CodeNodeExists, -110, "NodeExists", "NodeExists"},
		{CodeNotEmpty, -111, "NotEmpty", "Directory not empty"},
		{CodeSessionExpired, -112, "SessionExpired", "Session expired"},
		{CodeInvalidCallback, -113, "InvalidCallback", "Invalid callback"},
		{CodeInvalidACL, -114, "InvalidACL", "InvalidACL"},
		{CodeAuthFailed, -115, "AuthFailed", "AuthFailed"},
		{CodeSessionMoved, -118, "SessionMoved", "Session moved"},
		{CodeNotReadOnly, -119, "NotReadOnly", "Not a read-only call"},
		{CodeEphemeralOnLocalSession, -120, "EphemeralOnLocalSession", "Ephemeral node on local session"},
		{CodeNoWatcher, -121, "NoWatcher", "No such watcher"},
		{CodeRequestTimeout, -122, "RequestTimeout", "Unknown error REQUESTTIMEOUT"},
		{CodeReconfigDisabled, -123, "ReconfigDisabled", "Reconfig is disabled"},
		{CodeSessionClosedRequireSaslAuth, -124, "SessionClosedRequireSaslAuth", "Session closed because client failed to authenticate"},
		{CodeQuotaExceeded, -125, "QuotaExceeded", "Quota has exceeded"},
		{CodeThrottledOp, -127, "ThrottledOp", "Op throttled due to high load"},
	}
	for _, tc := range tests {
		if int32(tc.code) != tc.num || tc.code.String() != tc.name || tc.code.Message() != tc.message {
			t.Errorf("Code %d %q %q, want %d %q %q", int32(tc.code), tc.code, tc.code.Message(), tc.num, tc.name, tc.message)
		}
	}
	if len(codeNames) != len(tests) {
		t.Errorf("%d named codes, %d tested", len(codeNames), len(tests))
	}
	if got := Code(-126).String(); got != "Code(-126)" {
		t.Errorf("unknown code String = %q", got)
	}
}

func TestSmallEnums(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		num  int32
		name string
	}{
		{EventNone, -1, "None"}, {EventNodeCreated, 1, "NodeCreated"}, {EventNodeDeleted, 2, "NodeDeleted"},
		{EventNodeDataChanged, 3, "NodeDataChanged"}, {EventNodeChildrenChanged, 4, "NodeChildrenChanged"},
		{EventDataWatchRemoved, 5, "DataWatchRemoved"}, {EventChildWatchRemoved, 6, "ChildWatchRemoved"},
		{EventPersistentWatchRemoved, 7, "PersistentWatchRemoved"},
		{StateUnknown, -1, "Unknown"}, {StateDisconnected, 0, "Disconnected"},
		{StateNoSyncConnected, 1, "NoSyncConnected"}, {StateSyncConnected, 3, "SyncConnected"},
		{StateAuthFailed, 4, "AuthFailed"}, {StateConnectedReadOnly, 5, "ConnectedReadOnly"},
		{StateSaslAuthenticated, 6, "SaslAuthenticated"}, {StateExpired, -112, "Expired"}, {StateClosed, 7, "Closed"},
		{ModePersistent, 0, "PERSISTENT"}, {ModeEphemeral, 1, "EPHEMERAL"},
		{ModePersistentSequential, 2, "PERSISTENT_SEQUENTIAL"}, {ModeEphemeralSequential, 3, "EPHEMERAL_SEQUENTIAL"},
		{ModeContainer, 4, "CONTAINER"}, {ModePersistentWithTTL, 5, "PERSISTENT_WITH_TTL"},
		{ModePersistentSequentialWithTTL, 6, "PERSISTENT_SEQUENTIAL_WITH_TTL"},
		{AddWatchPersistent, 0, "PERSISTENT"}, {AddWatchPersistentRecursive, 1, "PERSISTENT_RECURSIVE"},
		{WatcherChildren, 1, "Children"}, {WatcherData, 2, "Data"}, {WatcherAny, 3, "Any"},
	}
	for _, tc := range tests {
		if got := fmt.Sprintf("%d", tc.v); got != fmt.Sprint(tc.num) || tc.v.String() != tc.name {
			t.Errorf("%T %s %q, want %d %q", tc.v, got, tc.v, tc.num, tc.name)
		}
	}
	if PermRead != 1 || PermWrite != 2 || PermCreate != 4 || PermDelete != 8 || PermAdmin != 16 || PermAll != 31 {
		t.Errorf("perms %d %d %d %d %d %d", PermRead, PermWrite, PermCreate, PermDelete, PermAdmin, PermAll)
	}
	if XidNotification != -1 || XidPing != -2 || XidAuth != -4 || XidSetWatches != -8 {
		t.Errorf("xids %d %d %d %d", XidNotification, XidPing, XidAuth, XidSetWatches)
	}
}

func TestCreateModeProperties(t *testing.T) {
	tests := []struct {
		m                                            CreateMode
		valid, ephemeral, sequential, container, ttl bool
	}{
		{ModePersistent, true, false, false, false, false},
		{ModeEphemeral, true, true, false, false, false},
		{ModePersistentSequential, true, false, true, false, false},
		{ModeEphemeralSequential, true, true, true, false, false},
		{ModeContainer, true, false, false, true, false},
		{ModePersistentWithTTL, true, false, false, false, true},
		{ModePersistentSequentialWithTTL, true, false, true, false, true},
		{-1, false, false, false, false, false},
		{7, false, false, false, false, false},
	}
	for _, tc := range tests {
		m := tc.m
		if m.Valid() != tc.valid || m.Ephemeral() != tc.ephemeral || m.Sequential() != tc.sequential ||
			m.Container() != tc.container || m.TTL() != tc.ttl {
			t.Errorf("%v: valid %v ephemeral %v sequential %v container %v ttl %v", m,
				m.Valid(), m.Ephemeral(), m.Sequential(), m.Container(), m.TTL())
		}
	}
}
