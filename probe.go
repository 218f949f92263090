package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// runProbe is `janus probe URL`: a health check for images with no shell
// or curl. It exits 0 when URL answers 200 within 5 seconds.
func runProbe(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: janus probe URL (for example http://127.0.0.1:8080/livez)")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe: %s answered %s", args[0], resp.Status)
	}
	return nil
}
