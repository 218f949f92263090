package zab

import (
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestNewMembership(t *testing.T) {
	for _, tc := range []struct {
		name              string
		voters, observers []uint64
		err               string
	}{
		{name: "three voters", voters: []uint64{3, 1, 2}},
		{name: "voters and an observer", voters: []uint64{1, 2, 3}, observers: []uint64{4}},
		{name: "no voters", observers: []uint64{4}, err: "without voters"},
		{name: "voter twice", voters: []uint64{1, 1}, err: "member 1 twice"},
		{name: "voter and observer", voters: []uint64{1, 2}, observers: []uint64{2}, err: "member 2 twice"},
		{name: "member zero", voters: []uint64{0, 1}, err: "member 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMembership(tc.voters, tc.observers)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(m.Voters); i++ {
				if m.Voters[i-1] >= m.Voters[i] {
					t.Fatalf("voters not sorted: %v", m.Voters)
				}
			}
		})
	}
}

// TestQuorumValue checks the commit rule while a change is pending: an
// entry before the change commits with a quorum of the active
// configuration; the change and what follows it need a quorum of both.
func TestQuorumValue(t *testing.T) {
	old, _ := NewMembership([]uint64{1, 2, 3}, nil)
	next, _ := NewMembership([]uint64{1, 2, 3, 4, 5}, nil)
	next.Index = 10
	for _, tc := range []struct {
		name  string
		acked map[uint64]uint64
		next  *Membership
		want  uint64
		ok    bool
	}{
		{name: "static", acked: map[uint64]uint64{1: 12, 2: 11, 3: 5}, want: 11, ok: true},
		{name: "static without a quorum", acked: map[uint64]uint64{1: 12}, ok: false},
		{name: "pending: the new voters lag, entries before the change commit",
			acked: map[uint64]uint64{1: 12, 2: 12}, next: &next, want: 9, ok: true},
		{name: "pending: a quorum of both holds 11",
			acked: map[uint64]uint64{1: 12, 2: 11, 4: 11}, next: &next, want: 11, ok: true},
		{name: "pending: the new quorum alone is not enough",
			acked: map[uint64]uint64{1: 12, 4: 12, 5: 12}, next: &next, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Core{id: 1}
			c.setMembership(old, tc.next)
			got, ok := c.quorumValue(func(id uint64) (uint64, bool) { v, ok := tc.acked[id]; return v, ok })
			if ok != tc.ok || (ok && got != tc.want) {
				t.Fatalf("quorumValue = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestMembershipEncoding checks that a configuration entry carries every
// field but Version and Index (the entry's own), and that damaged data is
// an error rather than another configuration.
func TestMembershipEncoding(t *testing.T) {
	m, err := NewMembership([]uint64{1, 2, 3}, []uint64{7})
	if err != nil {
		t.Fatal(err)
	}
	m.LastID = 9
	m.Addrs = map[uint64]string{1: "a:1", 2: "b:2", 3: "c:3", 7: "d:4"}
	m.Meta = map[uint64][]byte{2: []byte("name=two"), 7: {0, 1}}
	data := EncodeMembership(m)
	got, err := membershipOf(Entry{Index: 5, Zxid: MakeZxid(2, 1), Time: 1_764_662_400_123, Kind: EntryMembership, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	m.Version, m.Index, m.Time = MakeZxid(2, 1), 5, 1_764_662_400_123
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	// The membership file keeps the entry's own fields beside its data,
	// and still reads a file from before it kept the time.
	file, err := decodeMembershipFile(encodeMembershipFile(m))
	if err != nil || !reflect.DeepEqual(file, m) {
		t.Fatalf("membership file: decoded %+v (%v), want %+v", file, err, m)
	}
	old := append([]byte(membershipMagicNoTime), encodeMembershipFile(m)[4:20]...)
	old = append(old, data...)
	old = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, crcTable))
	noTime := m
	noTime.Time = 0
	if file, err := decodeMembershipFile(old); err != nil || !reflect.DeepEqual(file, noTime) {
		t.Fatalf("membership file without time: decoded %+v (%v), want %+v", file, err, noTime)
	}
	for n := range len(data) {
		if _, err := membershipOf(Entry{Index: 5, Data: data[:n]}); err == nil {
			t.Errorf("decoding the first %d of %d bytes: no error", n, len(data))
		}
	}
	if _, err := membershipOf(Entry{Index: 5, Data: append(slices.Clone(data), 0)}); err == nil {
		t.Error("a trailing byte: no error")
	}
}
