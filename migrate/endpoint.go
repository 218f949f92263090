package migrate

import (
	"fmt"
	"strings"
)

// Endpoint is a parsed --from or --to value.
type Endpoint struct {
	// Scheme is "zk" or "etcd".
	Scheme string
	// Hosts are the host:port addresses, in the order given.
	Hosts []string
	// Path is the subtree (ZooKeeper) or key prefix (etcd) to copy; empty
	// means everything.
	Path string
}

func (e Endpoint) String() string {
	return e.Scheme + "://" + strings.Join(e.Hosts, ",") + e.Path
}

// ParseEndpoint parses scheme://host:port[,host:port...][/path]. It does not
// use net/url because a comma-separated host list is not a URL authority.
func ParseEndpoint(s string) (Endpoint, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Endpoint{}, fmt.Errorf("endpoint %q: want zk://host:port[/path] or etcd://host:port[/prefix]", s)
	}
	if scheme != "zk" && scheme != "etcd" {
		return Endpoint{}, fmt.Errorf("endpoint %q: unknown scheme %q (want zk or etcd)", s, scheme)
	}
	hosts, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hosts, path = rest[:i], rest[i:]
	}
	e := Endpoint{Scheme: scheme, Path: path}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if !strings.Contains(h, ":") {
				return Endpoint{}, fmt.Errorf("endpoint %q: host %q has no port", s, h)
			}
			e.Hosts = append(e.Hosts, h)
		}
	}
	if len(e.Hosts) == 0 {
		return Endpoint{}, fmt.Errorf("endpoint %q: no host", s)
	}
	if scheme == "zk" && path != "" {
		if path == "/" {
			e.Path = ""
		} else if strings.HasSuffix(path, "/") {
			return Endpoint{}, fmt.Errorf("endpoint %q: a ZooKeeper path must not end in /", s)
		}
	}
	return e, nil
}
