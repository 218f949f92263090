package cluster

import "go.uber.org/zap"

// nopLogger keeps clientv3's retry chatter out of test output.
func nopLogger() *zap.Logger { return zap.NewNop() }
