package core

import (
	"net/netip"
	"strconv"
	"strings"
)

// CheckACL reports whether identities auth may do perm on a node with acl,
// by ZooKeeper's rules: an empty ACL allows everything, world:anyone matches
// everyone, a super identity matches everything, digest and other schemes
// match by equal ID, and ip matches an address or a CIDR prefix. A nil auth
// means the caller is not subject to ACLs (etcd clients).
func CheckACL(acl []ACL, perm Perm, auth []ID) bool {
	if auth == nil || len(acl) == 0 {
		return true
	}
	for _, id := range auth {
		if id.Scheme == "super" {
			return true
		}
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		if a.ID.Scheme == "world" && a.ID.ID == "anyone" {
			return true
		}
		for _, id := range auth {
			if id.Scheme != a.ID.Scheme {
				continue
			}
			if id.Scheme == "ip" {
				if ipMatches(a.ID.ID, id.ID) {
					return true
				}
				continue
			}
			if id.ID == a.ID.ID {
				return true
			}
		}
	}
	return false
}

// ipMatches reports whether addr falls in pattern ("10.0.0.1" or "10.0.0.0/8").
func ipMatches(pattern, addr string) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	if !strings.Contains(pattern, "/") {
		p, err := netip.ParseAddr(pattern)
		return err == nil && p == ip
	}
	base, bitsStr, _ := strings.Cut(pattern, "/")
	bits, err := strconv.Atoi(bitsStr)
	if err != nil {
		return false
	}
	b, err := netip.ParseAddr(base)
	if err != nil {
		return false
	}
	prefix, err := b.Prefix(bits)
	return err == nil && prefix.Contains(ip)
}
