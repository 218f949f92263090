package core

import (
	"bytes"
	"sort"
)

// DoRange answers an etcd range over v with etcd v3.7's semantics: count is
// the number of keys in the range whatever the limit and the revision
// filters; with a sort or a revision filter, filtering and sorting happen
// before the limit; a non-key sort target with no order sorts ascending.
// opts.Rev is ignored: the caller picks the View of the wanted revision.
func DoRange(v View, key, end []byte, opts RangeOptions) (OpResult, error) {
	res := OpResult{Kind: OpRange}
	fetchAll := opts.SortOrder != SortNone || opts.MinModRev != 0 || opts.MaxModRev != 0 ||
		opts.MinCreateRev != 0 || opts.MaxCreateRev != 0
	var nodes []*Node
	err := rangeNodes(v, key, end, func(n *Node) bool {
		res.Count++
		if opts.CountOnly {
			return true
		}
		if fetchAll || opts.Limit <= 0 || int64(len(nodes)) <= opts.Limit {
			nodes = append(nodes, n)
		}
		return true
	})
	if err != nil {
		return OpResult{}, err
	}
	nodes = pruneNodes(nodes, func(n *Node) bool {
		return (opts.MaxModRev != 0 && n.ModRev > opts.MaxModRev) ||
			(opts.MinModRev != 0 && n.ModRev < opts.MinModRev) ||
			(opts.MaxCreateRev != 0 && n.CreateRev > opts.MaxCreateRev) ||
			(opts.MinCreateRev != 0 && n.CreateRev < opts.MinCreateRev)
	})
	sortNodes(nodes, opts)
	if opts.Limit > 0 && int64(len(nodes)) > opts.Limit {
		nodes = nodes[:opts.Limit]
		res.More = true
	}
	res.Nodes = keysOnly(nodes, opts)
	return res, nil
}

// sortNodes orders nodes (read in key order) as etcd orders a range's.
func sortNodes(nodes []*Node, opts RangeOptions) {
	order := opts.SortOrder
	switch {
	case opts.SortTarget != SortByKey && order == SortNone:
		order = SortAscend
	case opts.SortTarget == SortByKey && order == SortAscend:
		order = SortNone // already in key order
	}
	if order != SortNone {
		// sort.Sort (not a stable sort) on the same input order gives the
		// same order of ties as etcd's own sort.
		var s sort.Interface = nodeSorter{nodes: nodes, target: opts.SortTarget}
		if order == SortDescend {
			s = sort.Reverse(s)
		}
		sort.Sort(s)
	}
}

func keysOnly(nodes []*Node, opts RangeOptions) []*Node {
	if opts.KeysOnly {
		for i, n := range nodes {
			c := *n
			c.Value = nil
			nodes[i] = &c
		}
	}
	return nodes
}

// RangeChunk reads one chunk of a streamed etcd range (RangeStream): the
// first opts.Limit stored nodes of the range in key order (all of them if
// opts.Limit <= 0), and whether more follow. Unlike DoRange it stops
// reading one node past the limit and does not count the rest. As in
// etcd's Range, on which its RangeStream is built, a sort target other
// than the key with no order sorts the nodes read (the limit's and the one
// past it) before the limit applies; the caller refuses the other sorts
// and the revision filters.
func RangeChunk(v View, key, end []byte, opts RangeOptions) (nodes []*Node, more bool, err error) {
	err = rangeNodes(v, key, end, func(n *Node) bool {
		nodes = append(nodes, n)
		return opts.Limit <= 0 || int64(len(nodes)) <= opts.Limit
	})
	if err != nil {
		return nil, false, err
	}
	sortNodes(nodes, opts)
	if opts.Limit > 0 && int64(len(nodes)) > opts.Limit {
		nodes, more = nodes[:opts.Limit], true
	}
	return keysOnly(nodes, opts), more, nil
}

// CountRange returns the number of stored nodes an etcd key/range_end pair
// names.
func CountRange(v View, key, end []byte) (int64, error) {
	var n int64
	err := rangeNodes(v, key, end, func(*Node) bool { n++; return true })
	return n, err
}

func pruneNodes(nodes []*Node, drop func(*Node) bool) []*Node {
	out := nodes[:0]
	for _, n := range nodes {
		if !drop(n) {
			out = append(out, n)
		}
	}
	return out
}

type nodeSorter struct {
	nodes  []*Node
	target SortTarget
}

func (s nodeSorter) Len() int      { return len(s.nodes) }
func (s nodeSorter) Swap(i, j int) { s.nodes[i], s.nodes[j] = s.nodes[j], s.nodes[i] }
func (s nodeSorter) Less(i, j int) bool {
	a, b := s.nodes[i], s.nodes[j]
	switch s.target {
	case SortByVersion:
		return a.Version < b.Version
	case SortByCreate:
		return a.CreateRev < b.CreateRev
	case SortByMod:
		return a.ModRev < b.ModRev
	case SortByValue:
		return bytes.Compare(a.Value, b.Value) < 0
	}
	return bytes.Compare(a.Key, b.Key) < 0
}
