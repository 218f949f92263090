package backup

// ZooKeeper does not keep session passwords: it derives each from the
// session ID (ZooKeeperServer.generatePasswd, the same in 3.4 through
// 3.9): java.util.Random seeded with the ID xor a fixed constant, sixteen
// bytes of nextBytes. A restore gives each session the password its
// client holds, so a client that moves from the stopped ZooKeeper to
// Janus resumes its session instead of being told it expired.

// zkPasswordSecret is ZooKeeperServer's superSecret.
const zkPasswordSecret = 0xB3415C00

// zkSessionPassword is the password ZooKeeper gave session id.
func zkSessionPassword(id int64) []byte {
	r := newJavaRandom(id ^ zkPasswordSecret)
	p := make([]byte, 16)
	r.nextBytes(p)
	return p
}

// javaRandom is java.util.Random's linear congruential generator, as its
// documentation specifies it.
type javaRandom struct{ seed int64 }

const (
	javaRandomMultiplier = 0x5DEECE66D
	javaRandomMask       = 1<<48 - 1
)

func newJavaRandom(seed int64) *javaRandom {
	return &javaRandom{seed: (seed ^ javaRandomMultiplier) & javaRandomMask}
}

func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*javaRandomMultiplier + 0xB) & javaRandomMask
	return int32(r.seed >> (48 - bits))
}

// nextBytes fills b four bytes per int, low byte first.
func (r *javaRandom) nextBytes(b []byte) {
	for i := 0; i < len(b); {
		rnd := r.next(32)
		for n := min(len(b)-i, 4); n > 0; n-- {
			b[i] = byte(rnd)
			rnd >>= 8
			i++
		}
	}
}
