package zkapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// AdminHandler serves ZooKeeper AdminServer-style JSON commands under
// /commands/<name> (ruok, srvr, stat, mntr, conf, envi, cons, wchs, dump,
// isro, dirs and their long names).
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/commands", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"command": "commands", "error": nil, "commands": sortedKeys(adminAliases)})
	})
	mux.HandleFunc("/commands/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := strings.ToLower(r.PathValue("name"))
		canonical, ok := adminAliases[name]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"command": name, "error": "Command not found: " + name})
			return
		}
		if restrictedCommands[canonical] && s.restricted() && !s.rootRequest(r) {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"command": canonical, "error": "etcd authentication is enabled: this command needs an etcd root token in the Authorization header"})
			return
		}
		s.awaitReady()
		if canonical != "environment" && !s.backend.Status().ServesSessions() {
			// As ZooKeeper's AdminServer answers a command that needs a
			// running server.
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"command": canonical, "error": strings.TrimSuffix(notServing, "\n")})
			return
		}
		out, err := s.adminCommand(canonical)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"command": canonical, "error": err.Error()})
			return
		}
		out["command"] = canonical
		out["error"] = nil
		writeJSON(w, http.StatusOK, out)
	})
	return mux
}

// adminAliases maps short and long command names to the long one, as
// ZooKeeper's Commands registry does.
var adminAliases = map[string]string{
	"ruok": "ruok", "srvr": "server_stats", "server_stats": "server_stats",
	"stat": "stats", "stats": "stats", "mntr": "monitor", "monitor": "monitor",
	"conf": "configuration", "configuration": "configuration",
	"envi": "environment", "environment": "environment",
	"cons": "connections", "connections": "connections",
	"wchs": "watch_summary", "watch_summary": "watch_summary",
	"dump": "dump", "isro": "is_read_only", "is_read_only": "is_read_only",
	"dirs": "dirs",
}

func pairsMap(pairs [][2]string) map[string]any {
	m := map[string]any{}
	for _, p := range pairs {
		m[p[0]] = p[1]
	}
	return m
}

func (s *Server) adminCommand(name string) (map[string]any, error) {
	switch name {
	case "ruok":
		return map[string]any{}, nil
	case "is_read_only":
		return map[string]any{"read_only": false}, nil
	case "configuration":
		return pairsMap(s.conf()), nil
	case "environment":
		return pairsMap(s.envi()), nil
	case "monitor":
		pairs, err := s.mntr()
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		for _, p := range pairs {
			m[strings.TrimPrefix(p[0], "zk_")] = p[1]
		}
		return m, nil
	case "server_stats", "stats":
		// As ZooKeeper's SrvrCommand: version, read_only, the ServerStats
		// bean under server_stats, node_count; stats adds connections.
		census, err := s.backend.Census()
		if err != nil {
			return nil, err
		}
		l := s.stats.latency.snapshot()
		out := map[string]any{
			"version": version, "read_only": false, "node_count": census.ZnodeCount(),
			"server_stats": map[string]any{
				"packets_sent": s.stats.sent.Load(), "packets_received": s.stats.received.Load(),
				"fsync_threshold_exceed_count": 0, "provider_null": false, "server_state": s.mode(),
				"outstanding_requests": s.stats.outstanding.Load(),
				"min_latency":          l.min, "avg_latency": l.avg, "max_latency": l.max,
				"last_processed_zxid":          s.backend.Status().Rev,
				"num_alive_client_connections": len(s.connections()),
				"uptime":                       time.Since(s.started).Milliseconds(),
				"auth_failed_count":            s.stats.authFailed.Load(),
			},
		}
		if name == "stats" {
			out["connections"] = s.connInfos()
		}
		return out, nil
	case "connections":
		return map[string]any{"connections": s.connInfos()}, nil
	case "dirs":
		data, log := s.dirSizes()
		return map[string]any{"datadir_size": data, "logdir_size": log}, nil
	case "watch_summary":
		conns, paths, watches := s.watches.dataSummary()
		return map[string]any{"num_connections": conns, "num_paths": paths, "num_total_watches": watches}, nil
	case "dump":
		owners, err := s.ephemeralOwners()
		if err != nil {
			return nil, err
		}
		eph := map[string][]string{}
		for id, paths := range owners {
			eph[fmt.Sprintf("0x%x", id)] = paths
		}
		return map[string]any{"ephemerals": eph}, nil
	}
	return map[string]any{}, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
