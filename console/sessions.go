package console

import (
	"strconv"

	"github.com/januskv/janus/core"
)

// sessionView is one lease, which is a ZooKeeper session when Session is
// set: one list for both, since they are one thing.
type sessionView struct {
	leaseView
	// Face is "zookeeper" for a session, "etcd" for a lease.
	Face string `json:"face"`
	// Client is the session's client address when it is connected to
	// this member, and a lease's when it was granted through this member:
	// an etcd lease is not tied to a connection, so the address is the
	// granting client's, remembered by the member that granted it.
	Client    string   `json:"client,omitempty"`
	TimeoutMs int32    `json:"timeoutMs,omitempty"`
	Keys      []string `json:"keys"` // attached keys (ephemerals), as text
	MoreKeys  bool     `json:"moreKeys"`
}

// maxLeaseKeys bounds the ephemerals listed per lease.
const maxLeaseKeys = 100

// sessions answers /ui/api/sessions?offset=&limit=: leases and sessions in
// ID order with their time to live left and attached keys. With auth on,
// a key the user may not read is counted but not named.
func (c *Console) sessions(r *request) (any, error) {
	offset, err := intParam(r, "offset", 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 200, maxPage)
	if err != nil {
		return nil, err
	}
	v, err := c.cfg.Backend.Read(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	addrs := map[int64]string{}
	if c.cfg.SessionAddrs != nil {
		addrs = c.cfg.SessionAddrs()
	}
	var page []*core.Lease
	total := 0
	if err := v.Leases(func(l *core.Lease) bool {
		if total >= offset && len(page) < limit {
			page = append(page, l)
		}
		total++
		return true
	}); err != nil {
		return nil, err
	}
	out := []sessionView{}
	for _, l := range page {
		rem, _ := c.cfg.Backend.Leases().Remaining(l.ID)
		s := sessionView{leaseView: leaseView{ID: l.ID, IDHex: strconv.FormatInt(l.ID, 16), TTL: l.TTL, RemainingMs: rem, Session: l.Session != nil},
			Face: "etcd", Keys: []string{}}
		switch {
		case l.Session != nil:
			s.Face, s.TimeoutMs, s.Client = "zookeeper", l.Session.TimeoutMs, addrs[l.ID]
		case c.cfg.LeaseClient != nil:
			s.Client = c.cfg.LeaseClient(l.ID)
		}
		hidden := 0
		if err := v.LeaseKeys(l.ID, func(key []byte) bool {
			if len(s.Keys) >= maxLeaseKeys {
				s.MoreKeys = true
				return false
			}
			if c.mayRead(r, key, nil) {
				s.Keys = append(s.Keys, string(key))
			} else {
				hidden++
			}
			return true
		}); err != nil {
			return nil, err
		}
		s.MoreKeys = s.MoreKeys || hidden > 0
		out = append(out, s)
	}
	return map[string]any{"rev": v.Rev(), "total": total, "offset": offset, "sessions": out}, nil
}
