package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/januskv/janus/core"
)

// healthChecks answers etcd's health endpoints on the HTTP port: /health
// in its JSON shape, and /livez and /readyz with their named checks, each
// with the query parameters, status codes and reasons etcd v3.7 gives. All
// of them read the member's Status, so a member that stopped, has no
// leader or has an alarm raised says so.
type healthChecks struct {
	b   core.Backend
	log *slog.Logger
	// timeout bounds the read each check makes, as etcd's request timeout
	// does.
	timeout time.Duration
}

// register installs /health, /livez, /readyz and one path per check
// (/readyz/linearizable_read, ...).
func (h *healthChecks) register(mux *http.ServeMux) {
	mux.HandleFunc("/health", h.health)
	for _, group := range []struct {
		root   string
		checks []namedCheck
	}{
		{"/livez", []namedCheck{
			{"serializable_read", h.readCheck(true)},
		}},
		{"/readyz", []namedCheck{
			{"data_corruption", h.alarmCheck("CORRUPT")},
			{"serializable_read", h.readCheck(true)},
			{"linearizable_read", h.readCheck(false)},
			{"non_learner", h.learnerCheck},
		}},
	} {
		mux.HandleFunc(group.root, h.checksHandler(group.root, group.checks, true))
		for _, c := range group.checks {
			mux.HandleFunc(group.root+"/"+c.name, h.checksHandler(group.root+"/"+c.name, []namedCheck{c}, false))
		}
	}
}

// namedCheck is one of /livez's or /readyz's checks, in the order etcd
// lists them.
type namedCheck struct {
	name  string
	check func(context.Context) error
}

// healthAnswer is etcd's /health body.
type healthAnswer struct {
	Health string `json:"health"`
	Reason string `json:"reason"`
}

// health answers /health as etcd does: alarms first (?exclude=NOSPACE
// ignores one), then the leader (skipped by ?serializable=true), then a
// read, linearizable unless serializable. The body is JSON either way; a
// failure is a 503.
func (h *healthChecks) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	serializable := r.URL.Query().Get("serializable") == "true"
	a := h.check(r.Context(), r.URL.Query()["exclude"], serializable)
	body, _ := json.Marshal(a)
	if a.Health != "true" {
		h.log.Warn("/health false", "reason", a.Reason)
		http.Error(w, string(body), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (h *healthChecks) check(ctx context.Context, excludeAlarms []string, serializable bool) healthAnswer {
	st := h.b.Status()
	for _, a := range st.Alarms {
		if slices.Contains(excludeAlarms, a) {
			continue
		}
		switch a {
		case "NOSPACE", "CORRUPT":
			return healthAnswer{Health: "false", Reason: "ALARM " + a}
		default:
			return healthAnswer{Health: "false", Reason: "ALARM UNKNOWN"}
		}
	}
	if !serializable && st.LeaderID == 0 {
		return healthAnswer{Health: "false", Reason: "RAFT NO LEADER"}
	}
	if err := h.readCheck(serializable)(ctx); err != nil {
		return healthAnswer{Health: "false", Reason: "RANGE ERROR:" + err.Error()}
	}
	return healthAnswer{Health: "true"}
}

// readCheck is etcd's read check: a read of the latest state, after a
// linearization unless serializable. A stopped member fails it with the
// failure that stopped it: its state is no longer kept current.
func (h *healthChecks) readCheck(serializable bool) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := h.b.Status().Err; err != nil {
			return fmt.Errorf("member stopped: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, h.timeout)
		defer cancel()
		if !serializable {
			if err := h.b.Linearize(ctx); err != nil {
				return err
			}
		}
		v, err := h.b.Read(ctx, 0)
		if err != nil {
			return err
		}
		v.Close()
		return nil
	}
}

// alarmCheck fails while the named alarm is raised.
func (h *healthChecks) alarmCheck(alarm string) func(context.Context) error {
	return func(context.Context) error {
		if slices.Contains(h.b.Status().Alarms, alarm) {
			return fmt.Errorf("alarm activated: %s", alarm)
		}
		return nil
	}
}

// learnerCheck fails on an observer, which etcd calls a learner.
func (h *healthChecks) learnerCheck(context.Context) error {
	st := h.b.Status()
	for _, m := range st.Members {
		if m.ID == st.MemberID && m.IsObserver {
			return fmt.Errorf("not supported for learner")
		}
	}
	return nil
}

// checksHandler runs checks as etcd's /livez and /readyz do: "ok" when
// all pass, with a "[+]name ok" line per check first under ?verbose; a
// 503 listing every check ("[-]name failed: reason") when one fails. The
// root path (excludable) drops the checks named by ?exclude=.
func (h *healthChecks) checksHandler(path string, checks []namedCheck, excludable bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		var exclude []string
		if excludable {
			exclude = r.URL.Query()["exclude"]
		}
		var out strings.Builder
		failed := false
		for _, c := range checks {
			if slices.Contains(exclude, c.name) {
				continue
			}
			if err := c.check(r.Context()); err != nil {
				fmt.Fprintf(&out, "[-]%s failed: %v\n", c.name, err)
				failed = true
			} else {
				fmt.Fprintf(&out, "[+]%s ok\n", c.name)
			}
		}
		if failed {
			h.log.Warn("health check failed", "path", path, "reason", out.String())
			http.Error(w, out.String(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprint(w, out.String())
		}
		fmt.Fprint(w, "ok\n")
	}
}
