//go:build !unix

package zkapi

// fileDescriptors reports no counts: ZooKeeper's mntr prints its file
// descriptor figures on Unix only.
func fileDescriptors() (open, limit int64, ok bool) { return 0, 0, false }
