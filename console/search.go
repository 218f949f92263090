package console

import (
	"bytes"
	"encoding/base64"

	"github.com/januskv/janus/core"
)

// hit is one key a search found, with enough to link to it and tell what
// it is without opening it.
type hit struct {
	Key64     string `json:"key64"`
	IsPath    bool   `json:"isPath"`
	Ephemeral bool   `json:"ephemeral"`
	Version   int64  `json:"version"`
	ModRev    int64  `json:"modRevision"`
}

// searchAnswer is one page of a search.
type searchAnswer struct {
	Rev  int64 `json:"rev"`
	Hits []hit `json:"hits"`
	// Scanned is how many keys this page examined.
	Scanned int `json:"scanned"`
	// Next is the key64 to continue after, "" when the search has
	// covered every key it can match.
	Next string `json:"next"`
}

// search answers /ui/api/search?q=&mode=&after64=&limit=: the stored keys
// of the whole keyspace that start with q (mode=prefix, the default) or
// contain it (mode=contains), in key order, byte for byte. A prefix search
// reads only the keys under q; a substring search reads every key from the
// cursor on, at most maxScan per call, and hands back a cursor, so a large
// store costs several short requests, never one long one. Implicit parents
// are not stored keys and are not found; keys the user may not read (its
// etcd roles, or the znode's ACL) are left out as the tree leaves them out.
func (c *Console) search(r *request) (any, error) {
	q := []byte(r.URL.Query().Get("q"))
	contains := false
	switch mode := r.URL.Query().Get("mode"); mode {
	case "", "prefix":
	case "contains":
		contains = true
		if len(q) == 0 {
			return nil, badRequest("a substring search needs q")
		}
	default:
		return nil, badRequest("mode must be prefix or contains")
	}
	limit, err := intParam(r, "limit", 100, maxPage)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		return nil, badRequest("limit must be positive")
	}
	start, end := q, core.PrefixEnd(q)
	if contains {
		start, end = nil, nil
	}
	if start, err = afterParam(r, start); err != nil {
		return nil, err
	}
	v, err := c.cfg.Backend.Read(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	kept, scanned, next, err := scanPage(v, start, end, limit, func(n *core.Node) bool {
		return (!contains || bytes.Contains(n.Key, q)) && c.mayReadNode(r, n)
	})
	if err != nil {
		return nil, err
	}
	a := searchAnswer{Rev: v.Rev(), Hits: []hit{}, Scanned: scanned, Next: next}
	for _, n := range kept {
		a.Hits = append(a.Hits, hit{Key64: base64.StdEncoding.EncodeToString(n.Key), IsPath: core.IsTreePath(n.Key),
			Ephemeral: n.Lease != 0, Version: n.Version, ModRev: n.ModRev})
	}
	return a, nil
}
