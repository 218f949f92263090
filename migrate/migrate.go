package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ErrDifferences is returned when verification finds the target differs
// from the source.
var ErrDifferences = errors.New("migrate: target differs from source")

// Config says what to copy where.
type Config struct {
	From, To Endpoint
	// Follow keeps applying the source's changes after the copy until the
	// context ends, then cuts over (see Cutover).
	Follow bool
	// Cutover brings the target level with the source, verifies and
	// returns: a copy (or a re-sync of an earlier copy) that catches up
	// with every change the source applied before the cut-over began. Run
	// returns nil only if source and target are then equal. A follow cuts
	// over the same way when its context ends.
	Cutover bool
	// DryRun reads the source (and counts the target) and prints what a
	// copy would skip or change, writing nothing.
	DryRun bool
	// State, when set, receives the follower's status (lag, applied
	// events) for display elsewhere than the progress lines.
	State *FollowState
	// StatusEvery is how often a follower prints its status line while it
	// changes (default 10s).
	StatusEvery time.Duration
	// Out receives progress lines and the verification report.
	Out io.Writer
	// ProgressEvery is how many nodes go by between progress lines
	// (default 1000).
	ProgressEvery int
	// BatchSize is how many etcd puts go into one target transaction
	// (default 64, below etcd's and Janus's limit of 128 ops per Txn).
	BatchSize int
	// DialTimeout bounds connecting to either side (default 10s).
	DialTimeout time.Duration
	// Auth are identities added to every ZooKeeper session the migration
	// opens, source and target, as zkCli's addauth does. Copying a node
	// with a digest ACL needs one with ADMIN permission on it: ZooKeeper
	// shows other sessions the digest as "x".
	Auth []Auth
}

func (c Config) withDefaults() Config {
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 1000
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 64
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.StatusEvery <= 0 {
		c.StatusEvery = 10 * time.Second
	}
	if c.State == nil {
		c.State = &FollowState{}
	}
	return c
}

func (c Config) check() error {
	switch {
	case c.From.Scheme == "etcd" && c.To.Scheme != "etcd":
		return fmt.Errorf("migrate: an etcd source needs an etcd target (--to etcd://...): etcd keys that are not ZooKeeper paths cannot go through the ZooKeeper face")
	case c.To.Path != "":
		return fmt.Errorf("migrate: the target %s must not name a path: the copy keeps the source's paths", c.To)
	}
	return nil
}

// Auth is one ZooKeeper identity, "scheme:credentials" on the command line
// (digest:user:password, or ZooKeeper's super user as digest:super:password).
type Auth struct {
	Scheme      string
	Credentials []byte
}

// ParseAuth parses scheme:credentials.
func ParseAuth(s string) (Auth, error) {
	scheme, cred, ok := strings.Cut(s, ":")
	if !ok || scheme == "" || cred == "" {
		return Auth{}, fmt.Errorf("auth %q: want scheme:credentials, such as digest:user:password", s)
	}
	return Auth{Scheme: scheme, Credentials: []byte(cred)}, nil
}

// Report says what a copy did.
type Report struct {
	Copied int   // nodes or keys written to the target
	Bytes  int64 // their data
	// Skipped lists what was deliberately not copied, one line each
	// (ephemerals, leased keys, /zookeeper).
	Skipped []string
	// ACLsDropped counts nodes whose non-default ACL an etcd target could
	// not carry.
	ACLsDropped int
	// Followed counts source events applied while following.
	Followed int
	// Deleted counts target nodes a re-sync deleted because the source no
	// longer had them.
	Deleted int
	// Differences lists what verification found, one line each.
	Differences []string

	// quiet keeps skipped nodes off the output (a re-sync's report: the
	// first copy already listed them).
	quiet bool
}

// Run copies From into To, follows the source when asked, then verifies.
// It returns ErrDifferences when verification finds any.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer m.close()
	rep := &Report{}
	if cfg.DryRun {
		return rep, m.dryRun(ctx, rep)
	}
	if err := m.copy(ctx, rep); err != nil {
		return rep, err
	}
	fmt.Fprintf(cfg.Out, "copied %d nodes (%d bytes) from %s to %s; skipped %d", rep.Copied, rep.Bytes, cfg.From, cfg.To, len(rep.Skipped))
	if rep.Deleted > 0 {
		fmt.Fprintf(cfg.Out, "; deleted %d the source no longer has", rep.Deleted)
	}
	fmt.Fprintln(cfg.Out)
	if rep.ACLsDropped > 0 {
		fmt.Fprintf(cfg.Out, "warning: %d nodes have ACLs an etcd target cannot carry; copy to the target's ZooKeeper face (--to zk://...) to keep them\n", rep.ACLsDropped)
	}
	if cfg.Follow || cfg.Cutover {
		if cfg.Follow && !cfg.Cutover {
			fmt.Fprintf(cfg.Out, "following %s until interrupted, then cutting over\n", cfg.From)
		}
		if err := m.follow(ctx, rep); err != nil {
			return rep, err
		}
		fmt.Fprintf(cfg.Out, "caught up with the source after %d followed events; verifying\n", rep.Followed)
		// The copy's context has ended (that is how following stops);
		// verification gets its own.
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		ctx = vctx
		if err := m.verify(ctx, rep); err != nil {
			fmt.Fprintf(cfg.Out, "cut-over NOT safe: the target differs from the source. If the source is still being written, stop its writers and run again with --cutover.\n")
			return rep, err
		}
		fmt.Fprint(cfg.Out, nextSteps(cfg))
		return rep, nil
	}
	return rep, m.verify(ctx, rep)
}

// nextSteps is what an operator does once a cut-over verified equal.
func nextSteps(cfg Config) string {
	if cfg.From.Scheme == "zk" {
		return fmt.Sprintf(`cut-over verified: %s and %s are equal.
Next: point every client at the target (its connect string) and restart or
reconnect them; keep the source's writers stopped. Curator and kazoo
recipes re-create their ephemeral nodes (locks, leader latches, group
members) on the target when their sessions reconnect there. See
docs/migration.md.
`, cfg.From, cfg.To)
	}
	return fmt.Sprintf(`cut-over verified: %s and %s are equal.
Next: point every client at the target's endpoints; keep the source's
writers stopped. Leased keys (elections, locks, registrations) are not
copied: their owners grant new leases and put them again on the target.
See docs/migration.md.
`, cfg.From, cfg.To)
}

// Verify compares From and To without copying, prints every difference to
// cfg.Out and returns ErrDifferences if there is any.
func Verify(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer m.close()
	rep := &Report{}
	return rep, m.verify(ctx, rep)
}

// migration is one source and target pair.
type migration interface {
	copy(ctx context.Context, rep *Report) error
	dryRun(ctx context.Context, rep *Report) error
	follow(ctx context.Context, rep *Report) error
	verify(ctx context.Context, rep *Report) error
	close()
}

func open(ctx context.Context, cfg Config) (migration, error) {
	if cfg.From.Scheme == "zk" {
		return openZK(ctx, cfg)
	}
	return openEtcd(ctx, cfg)
}

// progress prints a line every cfg.ProgressEvery nodes; with a total, the
// line is a bar with the rate and the time left.
type progress struct {
	out   io.Writer
	every int
	what  string
	n     int
	total int       // 0: unknown
	start time.Time // for the rate; zero: none shown
}

func (p *progress) add(k int) {
	before := p.n / p.every
	p.n += k
	if p.n/p.every != before {
		p.print()
	}
}

func (p *progress) print() {
	if p.total <= 0 || p.start.IsZero() {
		fmt.Fprintf(p.out, "%s %d\n", p.what, p.n)
		return
	}
	total := max(p.total, p.n) // a live source may have grown
	const width = 30
	done := width * p.n / total
	elapsed := time.Since(p.start)
	rate := float64(p.n) / max(elapsed.Seconds(), 1e-3)
	eta := time.Duration(float64(total-p.n) / max(rate, 1e-3) * float64(time.Second))
	fmt.Fprintf(p.out, "%s %d of %d [%s%s] %3d%% %.0f nodes/s ETA %v\n", p.what, p.n, total,
		strings.Repeat("#", done), strings.Repeat(".", width-done), 100*p.n/total, rate, eta.Round(time.Second))
}

// finish prints the last line if the last add did not.
func (p *progress) finish() {
	if p.n%p.every != 0 {
		p.print()
	}
}

// differ collects and prints differences as verification finds them.
type differ struct {
	out io.Writer
	rep *Report
}

func (d differ) add(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	d.rep.Differences = append(d.rep.Differences, line)
	fmt.Fprintf(d.out, "DIFF %s\n", line)
}

func (d differ) result(compared int) error {
	if n := len(d.rep.Differences); n > 0 {
		fmt.Fprintf(d.out, "verification: %d differences in %d nodes\n", n, compared)
		return fmt.Errorf("%w: %d differences", ErrDifferences, n)
	}
	fmt.Fprintf(d.out, "verification: %d nodes, no differences\n", compared)
	return nil
}
