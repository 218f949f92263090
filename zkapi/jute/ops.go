package jute

// NewRequest returns an empty record for the body that follows a
// RequestHeader of type op. It returns (nil, true) for the ops whose request
// has no body (ping, closeSession, whoAmI, createSession never comes from a
// client but has none either) and (nil, false) for types a client may not
// send. Notification and error are reply-only; deleteContainer is internal
// to ZooKeeper's container manager. A standalone check is answered like
// setData, with a Stat.
func NewRequest(op OpCode) (rec Record, known bool) {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer:
		return new(CreateRequest), true
	case OpCreateTTL:
		return new(CreateTTLRequest), true
	case OpDelete:
		return new(DeleteRequest), true
	case OpExists:
		return new(ExistsRequest), true
	case OpGetData:
		return new(GetDataRequest), true
	case OpSetData:
		return new(SetDataRequest), true
	case OpGetACL:
		return new(GetACLRequest), true
	case OpSetACL:
		return new(SetACLRequest), true
	case OpGetChildren:
		return new(GetChildrenRequest), true
	case OpGetChildren2:
		return new(GetChildren2Request), true
	case OpSync:
		return new(SyncRequest), true
	case OpCheck:
		return new(CheckVersionRequest), true
	case OpMulti, OpMultiRead:
		return new(MultiRequest), true
	case OpReconfig:
		return new(ReconfigRequest), true
	case OpCheckWatches:
		return new(CheckWatchesRequest), true
	case OpRemoveWatches:
		return new(RemoveWatchesRequest), true
	case OpAuth:
		return new(AuthPacket), true
	case OpSetWatches:
		return new(SetWatches), true
	case OpSetWatches2:
		return new(SetWatches2), true
	case OpSASL:
		return new(GetSASLRequest), true
	case OpGetEphemerals:
		return new(GetEphemeralsRequest), true
	case OpGetAllChildrenNumber:
		return new(GetAllChildrenNumberRequest), true
	case OpAddWatch:
		return new(AddWatchRequest), true
	case OpPing, OpCloseSession, OpWhoAmI, OpCreateSession:
		return nil, true
	}
	return nil, false
}

// NewResponse returns an empty record for the body that follows a
// successful ReplyHeader answering op. It returns (nil, true) for ops whose
// reply is the header alone (delete, setWatches, addWatch, removeWatches,
// checkWatches, auth, ping, closeSession) and (nil, false) for unknown ops.
func NewResponse(op OpCode) (rec Record, known bool) {
	switch op {
	case OpCreate:
		return new(CreateResponse), true
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		return new(Create2Response), true
	case OpExists:
		return new(ExistsResponse), true
	case OpGetData:
		return new(GetDataResponse), true
	case OpSetData, OpCheck:
		return new(SetDataResponse), true
	case OpReconfig:
		// A successful reconfig returns the new configuration like getData.
		return new(GetDataResponse), true
	case OpGetACL:
		return new(GetACLResponse), true
	case OpSetACL:
		return new(SetACLResponse), true
	case OpGetChildren:
		return new(GetChildrenResponse), true
	case OpGetChildren2:
		return new(GetChildren2Response), true
	case OpSync:
		return new(SyncResponse), true
	case OpMulti, OpMultiRead:
		return new(MultiResponse), true
	case OpSASL:
		return new(SetSASLResponse), true
	case OpGetEphemerals:
		return new(GetEphemeralsResponse), true
	case OpGetAllChildrenNumber:
		return new(GetAllChildrenNumberResponse), true
	case OpWhoAmI:
		return new(WhoAmIResponse), true
	case OpNotification:
		return new(WatcherEvent), true
	case OpDelete, OpSetWatches, OpSetWatches2, OpAddWatch, OpRemoveWatches, OpCheckWatches,
		OpAuth, OpPing, OpCloseSession:
		return nil, true
	}
	return nil, false
}
