package core

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
)

// MemState is an in-memory View of the latest state that Batches can be
// written into. It is the reference implementation the store is compared
// against in tests, and the quickest way to run the state machine directly.
type MemState struct {
	meta      Meta
	nodes     map[string]*Node
	dirs      map[string]*Dir
	children  map[string]bool
	leases    map[int64]*Lease
	leaseKeys map[string]bool
	applied   uint64
}

// NewMemState returns the state of a brand-new store: revision 1, no keys.
func NewMemState() *MemState {
	return &MemState{
		meta:      Meta{Rev: 1},
		nodes:     map[string]*Node{},
		dirs:      map[string]*Dir{},
		children:  map[string]bool{},
		leases:    map[int64]*Lease{},
		leaseKeys: map[string]bool{},
	}
}

// AppliedIndex is the index of the last batch written.
func (m *MemState) AppliedIndex() uint64 { return m.applied }

// Write stores the effects of one Batch.
func (m *MemState) Write(b *Batch) {
	for _, w := range b.Nodes {
		if w.Node == nil {
			delete(m.nodes, string(w.Key))
		} else {
			m.nodes[string(w.Key)] = w.Node
		}
	}
	for _, w := range b.Dirs {
		if w.Dir == nil {
			delete(m.dirs, string(w.Path))
		} else {
			m.dirs[string(w.Path)] = w.Dir
		}
	}
	for _, w := range b.Children {
		k := childKey(w.Parent, w.Name)
		if w.Present {
			m.children[k] = true
		} else {
			delete(m.children, k)
		}
	}
	for _, w := range b.Leases {
		if w.Lease == nil {
			delete(m.leases, w.ID)
		} else {
			m.leases[w.ID] = w.Lease
		}
	}
	for _, w := range b.LeaseKeys {
		k := leaseKeyKey(w.ID, w.Key)
		if w.Present {
			m.leaseKeys[k] = true
		} else {
			delete(m.leaseKeys, k)
		}
	}
	if b.Meta != nil {
		m.meta = *b.Meta
	}
	m.applied = b.Index
}

// ApplyEntry applies one entry directly and writes its batch.
func (m *MemState) ApplyEntry(e *Entry) (*Result, *Batch, error) {
	ov := NewOverlay(m)
	res, b, err := Apply(ov, e)
	if err != nil {
		return nil, nil, err
	}
	m.Write(b)
	return res, b, nil
}

func (m *MemState) Meta() (Meta, error) { return m.meta, nil }

func (m *MemState) Node(key []byte) (*Node, error) { return m.nodes[string(key)], nil }

func (m *MemState) Dir(path []byte) (*Dir, error) { return m.dirs[string(path)], nil }

func (m *MemState) Lease(id int64) (*Lease, error) { return m.leases[id], nil }

func (m *MemState) Range(start, end []byte, fn func(*Node) bool) error {
	for _, k := range slices.Sorted(maps.Keys(m.nodes)) {
		if k < string(start) || (end != nil && k >= string(end)) {
			continue
		}
		if !fn(m.nodes[k]) {
			return nil
		}
	}
	return nil
}

func (m *MemState) Children(parent []byte, fn func(name []byte) bool) error {
	prefix := string(parent) + "\x00"
	for _, k := range slices.Sorted(maps.Keys(m.children)) {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			if !fn([]byte(name)) {
				return nil
			}
		}
	}
	return nil
}

func (m *MemState) HasChild(parent, name []byte) (bool, error) {
	return m.children[childKey(parent, name)], nil
}

func (m *MemState) Leases(fn func(*Lease) bool) error {
	ids := make([]int64, 0, len(m.leases))
	for id := range m.leases {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !fn(m.leases[id]) {
			return nil
		}
	}
	return nil
}

func (m *MemState) LeaseKeys(id int64, fn func(key []byte) bool) error {
	prefix := leaseKeyKey(id, nil)
	for _, k := range slices.Sorted(maps.Keys(m.leaseKeys)) {
		if key, ok := strings.CutPrefix(k, prefix); ok {
			if !fn([]byte(key)) {
				return nil
			}
		}
	}
	return nil
}

// Hash returns a digest of the whole state, for determinism checks.
func (m *MemState) Hash() [32]byte {
	return HashView(m, m.dirPaths())
}

func (m *MemState) dirPaths() [][]byte {
	var out [][]byte
	for _, k := range slices.Sorted(maps.Keys(m.dirs)) {
		out = append(out, []byte(k))
	}
	return out
}

// HashView digests everything reachable in v: meta, every node, the given
// dirs and their children, every lease and its keys. Two replicas that
// applied the same log have equal hashes.
func HashView(v View, dirs [][]byte) [32]byte {
	h := sha256.New()
	var num [8]byte
	meta, _ := v.Meta()
	h.Write(AppendMeta(nil, meta))
	_ = v.Range(nil, nil, func(n *Node) bool {
		binary.BigEndian.PutUint64(num[:], uint64(len(n.Key)))
		h.Write(num[:])
		h.Write(n.Key)
		h.Write(AppendNode(nil, n))
		return true
	})
	for _, p := range dirs {
		d, _ := v.Dir(p)
		if d == nil {
			continue
		}
		h.Write(p)
		h.Write(AppendDir(nil, d))
		_ = v.Children(p, func(name []byte) bool {
			h.Write([]byte{0})
			h.Write(name)
			return true
		})
	}
	_ = v.Leases(func(l *Lease) bool {
		h.Write(AppendLease(nil, l))
		_ = v.LeaseKeys(l.ID, func(k []byte) bool { h.Write(k); return true })
		return true
	})
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
