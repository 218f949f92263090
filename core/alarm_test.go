package core_test

import (
	"reflect"
	"testing"

	"github.com/januskv/janus/core"
)

func TestAlarmsAreMetaAndKeepNoRevision(t *testing.T) {
	corrupt := func(member uint64) core.Alarm { return core.Alarm{Member: member, Type: core.AlarmCorrupt} }
	steps := []struct {
		name   string
		change core.AlarmChange
		want   []core.Alarm
		code   core.Code
	}{
		{"raise 3", core.AlarmChange{Activate: true, Alarm: corrupt(3)}, []core.Alarm{corrupt(3)}, core.CodeOK},
		{"raise 1 sorts first", core.AlarmChange{Activate: true, Alarm: corrupt(1)}, []core.Alarm{corrupt(1), corrupt(3)}, core.CodeOK},
		{"raise 3 again", core.AlarmChange{Activate: true, Alarm: corrupt(3)}, []core.Alarm{corrupt(1), corrupt(3)}, core.CodeOK},
		{"clear 1", core.AlarmChange{Alarm: corrupt(1)}, []core.Alarm{corrupt(3)}, core.CodeOK},
		{"clear absent", core.AlarmChange{Alarm: corrupt(2)}, []core.Alarm{corrupt(3)}, core.CodeOK},
		{"unknown type", core.AlarmChange{Activate: true, Alarm: core.Alarm{Member: 1, Type: 9}}, []core.Alarm{corrupt(3)}, core.CodeBadArguments},
		{"clear 3", core.AlarmChange{Alarm: corrupt(3)}, nil, core.CodeOK},
	}
	h := newHarness(t)
	h.txn(put("a", "1"))
	rev := h.rev()
	for _, s := range steps {
		c := s.change
		op := core.Op{Alarm: &c}
		// The log form must carry the change unchanged.
		dec, err := core.DecodeOp(core.EncodeOp(&op))
		if err != nil || !reflect.DeepEqual(dec, &op) {
			t.Fatalf("%s: op round trip: %+v, %v", s.name, dec, err)
		}
		res, b := h.apply(*dec)
		wantCode(t, res, s.code)
		if b.Changed || h.rev() != rev {
			t.Fatalf("%s: an alarm moved the revision to %d", s.name, h.rev())
		}
		m, _ := h.m.Meta()
		if !reflect.DeepEqual(m.Alarms, s.want) {
			t.Fatalf("%s: alarms %v, want %v", s.name, m.Alarms, s.want)
		}
		back, err := core.DecodeMeta(core.AppendMeta(nil, m))
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("%s: meta round trip: %+v, %v", s.name, back, err)
		}
	}
}

func TestHashOpsChangeNothing(t *testing.T) {
	h := newHarness(t)
	h.txn(put("a", "1"))
	before := h.m.Hash()
	for _, op := range []core.Op{
		{HashCheck: &core.HashCheck{}},
		{HashReport: &core.HashReport{Member: 2, Index: 7, Hash: 1<<63 + 5}},
	} {
		dec, err := core.DecodeOp(core.EncodeOp(&op))
		if err != nil || !reflect.DeepEqual(dec, &op) {
			t.Fatalf("op round trip: %+v, %v", dec, err)
		}
		res, b := h.apply(*dec)
		if res.Err != nil || b.Changed {
			t.Fatalf("%+v: %v, changed %v", op, res.Err, b.Changed)
		}
	}
	if h.m.Hash() != before {
		t.Fatal("hash ops changed the state")
	}
}
