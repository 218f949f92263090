//go:build !linux

package store

// osWritebackKick returns nil where the store knows no way to start
// writeback without waiting for it: Badger's own waits stay as they are.
func osWritebackKick() func(path string) error { return nil }
