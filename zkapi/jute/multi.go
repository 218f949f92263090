package jute

import "fmt"

// MultiOp is one op of a multi or multiRead request. Request is one of
// *CreateRequest (Type OpCreate, OpCreate2 or OpCreateContainer),
// *CreateTTLRequest (OpCreateTTL), *DeleteRequest, *SetDataRequest,
// *CheckVersionRequest (OpCheck), *GetChildrenRequest or *GetDataRequest.
type MultiOp struct {
	Type    OpCode
	Request Record
}

// MultiRequest is the body of OpMulti and OpMultiRead: ops, each behind a
// MultiHeader{Type, Done: false, Err: -1}, then MultiHeader{-1, true, -1}.
//
// Decoding enforces what ZooKeeper's MultiOperationRecord enforces while
// deserializing: only the op types above, and either all writes or all reads
// (getChildren, getData). Whether a write list arrived as OpMulti and a read
// list as OpMultiRead is for the server to check. A decoding error here is
// answered by ZooKeeper with MarshallingError.
type MultiRequest struct {
	Ops []MultiOp
}

func multiOpIsRead(t OpCode) bool { return t == OpGetChildren || t == OpGetData }

// newMultiOpRequest returns an empty request record for a multi op type, or
// nil if the type may not appear in a multi.
func newMultiOpRequest(t OpCode) Record {
	switch t {
	case OpCreate, OpCreate2, OpCreateContainer:
		return new(CreateRequest)
	case OpCreateTTL:
		return new(CreateTTLRequest)
	case OpDelete:
		return new(DeleteRequest)
	case OpSetData:
		return new(SetDataRequest)
	case OpCheck:
		return new(CheckVersionRequest)
	case OpGetChildren:
		return new(GetChildrenRequest)
	case OpGetData:
		return new(GetDataRequest)
	}
	return nil
}

func (r *MultiRequest) Encode(e *Encoder) {
	for i := range r.Ops {
		op := &r.Ops[i]
		if op.Request == nil || newMultiOpRequest(op.Type) == nil {
			e.Fail(fmt.Errorf("jute: encoding multi op %d of type %v: %w", i, op.Type, ErrInvalidMulti))
			continue
		}
		h := MultiHeader{Type: op.Type, Done: false, Err: -1}
		h.Encode(e)
		op.Request.Encode(e)
	}
	end := MultiHeader{Type: -1, Done: true, Err: -1}
	end.Encode(e)
}

func (r *MultiRequest) Decode(d *Decoder) {
	r.Ops = nil
	var h MultiHeader
	h.Decode(d)
	for d.Err() == nil && !h.Done {
		req := newMultiOpRequest(h.Type)
		if req == nil {
			d.Fail(fmt.Errorf("op type %v: %w", h.Type, ErrInvalidMulti))
			break
		}
		if len(r.Ops) > 0 && multiOpIsRead(r.Ops[0].Type) != multiOpIsRead(h.Type) {
			d.Fail(fmt.Errorf("%v after %v, mixing reads and writes: %w", h.Type, r.Ops[0].Type, ErrInvalidMulti))
			break
		}
		req.Decode(d)
		r.Ops = append(r.Ops, MultiOp{Type: h.Type, Request: req})
		h.Decode(d)
	}
	if d.Err() != nil {
		r.Ops = nil
	}
}

// MultiResult is one result of a multi or multiRead response. Which fields
// are encoded depends on Type:
//
//	OpCreate      Path
//	OpCreate2     Path, Stat (ZooKeeper answers create2, createContainer
//	              and createTTL ops in a multi with this type)
//	OpDelete      nothing
//	OpCheck       nothing
//	OpSetData     Stat
//	OpGetChildren Children
//	OpGetData     Data, Stat
//	OpError       Err
//
// The MultiHeader before a result carries Err for OpError and 0 otherwise.
type MultiResult struct {
	Type     OpCode
	Err      Code
	Path     string
	Stat     Stat
	Data     []byte
	Children []string
}

// MultiResponse is the body of a reply to OpMulti or OpMultiRead. A failed
// multi is still a reply with header error 0 and one OpError result per op.
type MultiResponse struct {
	Results []MultiResult
}

func (r *MultiResponse) Encode(e *Encoder) {
	for i := range r.Results {
		res := &r.Results[i]
		h := MultiHeader{Type: res.Type}
		if res.Type == OpError {
			h.Err = res.Err
		}
		switch res.Type {
		case OpCreate, OpCreate2, OpDelete, OpCheck, OpSetData, OpGetChildren, OpGetData, OpError:
		default:
			e.Fail(fmt.Errorf("jute: encoding multi result %d of type %v: %w", i, res.Type, ErrInvalidMulti))
			continue
		}
		h.Encode(e)
		switch res.Type {
		case OpCreate:
			e.UString(res.Path)
		case OpCreate2:
			e.UString(res.Path)
			res.Stat.Encode(e)
		case OpSetData:
			res.Stat.Encode(e)
		case OpGetChildren:
			e.StringVector(res.Children)
		case OpGetData:
			e.Buffer(res.Data)
			res.Stat.Encode(e)
		case OpError:
			e.Int32(int32(res.Err))
		}
	}
	end := MultiHeader{Type: -1, Done: true, Err: -1}
	end.Encode(e)
}

func (r *MultiResponse) Decode(d *Decoder) {
	r.Results = nil
	var h MultiHeader
	h.Decode(d)
	for d.Err() == nil && !h.Done {
		res := MultiResult{Type: h.Type}
		switch h.Type {
		case OpCreate:
			res.Path = d.UString()
		case OpCreate2:
			res.Path = d.UString()
			res.Stat.Decode(d)
		case OpDelete, OpCheck:
		case OpSetData:
			res.Stat.Decode(d)
		case OpGetChildren:
			res.Children = d.StringVector()
		case OpGetData:
			res.Data = d.Buffer()
			res.Stat.Decode(d)
		case OpError:
			res.Err = Code(d.Int32())
		default:
			d.Fail(fmt.Errorf("result type %v: %w", h.Type, ErrInvalidMulti))
		}
		r.Results = append(r.Results, res)
		h.Decode(d)
	}
	if d.Err() != nil {
		r.Results = nil
	}
}
