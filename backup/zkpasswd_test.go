package backup

import (
	"encoding/hex"
	"testing"
)

// TestZKSessionPassword pins the derivation to what a JVM computes with
// new java.util.Random(id ^ 0xB3415C00L).nextBytes(new byte[16]), the body
// of ZooKeeperServer.generatePasswd.
func TestZKSessionPassword(t *testing.T) {
	cases := []struct {
		id   int64
		want string
	}{
		{0, "f22acd4a97e69d6d20a49bb638eadb38"},
		{1, "054cc74a37327db215e702e20c73f005"},
		{0x1000a2b3c4d0001, "bc473af422c94ce5244ba1f06f871acd"},
		{-1, "20f62cb5648dc2d771471c8a2486a9ee"},
		{1 << 56, "f22acd4a97e69d6d20a49bb638eadb38"}, // the seed keeps 48 bits
	}
	for _, c := range cases {
		if got := hex.EncodeToString(zkSessionPassword(c.id)); got != c.want {
			t.Errorf("password of session %#x: %s, want %s", c.id, got, c.want)
		}
	}
}
