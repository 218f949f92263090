package main

import (
	"io"
	"log/slog"
	"strconv"
)

// newLogger returns the server's logger: JSON by default, as a service's
// logs are read by machines (etcd's default too), or text. Every record
// carries the member's ID in hexadecimal, as etcd's "local-member-id".
func newLogger(w io.Writer, cfg Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With("member_id", strconv.FormatUint(cfg.ID, 16))
}
