package etcdapi

// SetWatchQueueLen bounds the revisions a watch stream may have waiting,
// so a test can make streams fall back to history.
func SetWatchQueueLen(c *Config, n int) { c.watchQueueLen = n }

// WatchFellBehind returns how many times a watch stream's queue was full
// and the stream went on from history.
func (s *Server) WatchFellBehind() uint64 { return s.watchStats.fellBehind.Load() }
