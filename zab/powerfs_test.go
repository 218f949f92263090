package zab

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
)

// errPowerCut is what every operation of a powerFS returns once its power
// is cut.
var errPowerCut = errors.New("power cut")

// powerFS is an in-memory fileSystem for one directory that keeps apart
// what a file holds (what reads return) and what stable storage holds: what
// the file's last Sync or Datasync, and for names the last SyncDir, made
// durable. A test cuts the power at a chosen operation (cutAt): that
// operation and every later one fail with errPowerCut and change nothing
// (a write in flight lands in part). crash then builds what a restart
// finds, keeping only what was synced for sure:
//
//   - names: the durable ones, then a random subset, in order, of the
//     creations, renames and removals made since the last SyncDir (a
//     filesystem may persist any of them without the others);
//   - each file: its synced bytes; its size, the synced or the current one
//     (a truncation is all or nothing); and each page holding bytes
//     written or added since the last sync gets, for
//     those bytes only, their old value, their new value, zeros, garbage,
//     or a mix of old, new and zeros sector by sector. Pages are decided
//     independently, so a write comes back torn at any point, zeroed, or
//     with its pages written back in any order.
type powerFS struct {
	rng        *rand.Rand
	pageSize   int
	sectorSize int
	noAllocate bool // Allocate fails as on a filesystem without fallocate

	names   map[string]*simFile // as the running program sees them
	durable map[string]*simFile // as of the last SyncDir
	pending []nameChange        // since the last SyncDir, in order

	ops   int  // operations that change something, so far
	cutAt int  // the operation at which the power is cut; 0: never
	cut   bool // the power is cut
	gen   int  // crashes so far: handles opened before one are dead
}

type simFile struct {
	data  []byte // what reads return
	disk  []byte // what stable storage holds
	dirty []bool // per byte: changed since the last sync
}

// nameChange is a creation (from empty), a removal (to empty) or a rename.
type nameChange struct {
	from, to string
	file     *simFile
}

func newPowerFS(rng *rand.Rand, pageSize, sectorSize int) *powerFS {
	return &powerFS{rng: rng, pageSize: pageSize, sectorSize: sectorSize,
		names: map[string]*simFile{}, durable: map[string]*simFile{}}
}

// step accounts for one operation that changes something, cutting the
// power if it is the chosen one.
func (p *powerFS) step() error {
	if p.cut {
		return errPowerCut
	}
	p.ops++
	if p.cutAt != 0 && p.ops >= p.cutAt {
		p.cut = true
		return errPowerCut
	}
	return nil
}

func (p *powerFS) ReadDir(dir string) ([]string, error) {
	if p.cut {
		return nil, errPowerCut
	}
	var out []string
	for name := range p.names {
		if filepath.Dir(name) == dir {
			out = append(out, filepath.Base(name))
		}
	}
	slices.Sort(out)
	return out, nil
}

func (p *powerFS) ReadFile(path string) ([]byte, error) {
	if p.cut {
		return nil, errPowerCut
	}
	f, ok := p.names[path]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
	}
	return slices.Clone(f.data), nil
}

func (p *powerFS) OpenFile(path string, flag int) (logFile, error) {
	if p.cut {
		return nil, errPowerCut
	}
	f, ok := p.names[path]
	if !ok {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		}
		if err := p.step(); err != nil {
			return nil, err
		}
		f = &simFile{}
		p.names[path] = f
		p.pending = append(p.pending, nameChange{to: path, file: f})
	}
	h := &simHandle{fs: p, f: f, path: path, gen: p.gen}
	if flag&os.O_TRUNC != 0 {
		if err := h.Truncate(0); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (p *powerFS) Remove(path string) error {
	if err := p.step(); err != nil {
		return err
	}
	f, ok := p.names[path]
	if !ok {
		return &fs.PathError{Op: "remove", Path: path, Err: fs.ErrNotExist}
	}
	delete(p.names, path)
	p.pending = append(p.pending, nameChange{from: path, file: f})
	return nil
}

func (p *powerFS) Rename(from, to string) error {
	if err := p.step(); err != nil {
		return err
	}
	f, ok := p.names[from]
	if !ok {
		return &fs.PathError{Op: "rename", Path: from, Err: fs.ErrNotExist}
	}
	delete(p.names, from)
	p.names[to] = f
	p.pending = append(p.pending, nameChange{from: from, to: to, file: f})
	return nil
}

func (p *powerFS) SyncDir(dir string) error {
	if err := p.step(); err != nil {
		return err
	}
	p.durable = maps.Clone(p.names)
	p.pending = nil
	return nil
}

// crash is a restart after the power was cut (or at any moment): it keeps
// what stable storage holds, as the type's comment says, and turns the
// power back on.
func (p *powerFS) crash() {
	names := maps.Clone(p.durable)
	for _, c := range p.pending {
		if p.rng.IntN(2) == 0 {
			continue // this change never reached the disk
		}
		if c.from != "" && names[c.from] == c.file {
			delete(names, c.from)
		}
		if c.to != "" {
			names[c.to] = c.file
		}
	}
	// In name order: the seed must replay the same crash.
	for _, name := range slices.Sorted(maps.Keys(names)) {
		names[name].crash(p)
	}
	p.names, p.durable, p.pending = names, maps.Clone(names), nil
	p.cut, p.cutAt = false, 0
	p.gen++
}

// What a page, or a sector, of unsynced bytes holds after a crash.
const (
	keepOld = iota
	keepNew
	zeroed
	garbage
	bySector // each sector keepOld, keepNew or zeroed
)

func (f *simFile) crash(p *powerFS) {
	size := len(f.disk)
	if len(f.data) != size && p.rng.IntN(2) == 0 {
		size = len(f.data)
	}
	out := make([]byte, size)
	copy(out, f.disk)
	for lo := 0; lo < size; lo += p.pageSize {
		hi := min(lo+p.pageSize, size)
		if lo >= len(f.dirty) || !slices.Contains(f.dirty[lo:min(hi, len(f.dirty))], true) {
			continue
		}
		page := []int{keepOld, keepOld, keepNew, keepNew, keepNew, zeroed, zeroed, garbage, bySector, bySector}[p.rng.IntN(10)]
		for s := lo; s < hi; s += p.sectorSize {
			what := page
			if what == bySector {
				what = p.rng.IntN(3)
			}
			for i := s; i < min(s+p.sectorSize, hi); i++ {
				if i >= len(f.dirty) || !f.dirty[i] {
					continue
				}
				switch what {
				case keepOld:
					out[i] = byteAt(f.disk, i)
				case keepNew:
					out[i] = byteAt(f.data, i)
				case zeroed:
					out[i] = 0
				case garbage:
					out[i] = byte(p.rng.Uint32())
				}
			}
		}
	}
	f.data, f.disk, f.dirty = out, slices.Clone(out), nil
}

func byteAt(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// markDirty records that bytes [lo, hi) changed since the last sync.
func (f *simFile) markDirty(lo, hi int) {
	if n := max(len(f.data), len(f.disk), hi); len(f.dirty) < n {
		f.dirty = append(f.dirty, make([]bool, n-len(f.dirty))...)
	}
	for i := lo; i < hi; i++ {
		f.dirty[i] = true
	}
}

// resize sets the file's size, zero-filling what it grows by. Shrinking
// changes only the size: a crash leaves the old size with the old bytes, or
// the new one (a journaling filesystem never shows a truncation half done).
func (f *simFile) resize(size int) {
	old := len(f.data)
	if size < old {
		f.data = f.data[:size]
		return
	}
	f.data = append(f.data, make([]byte, size-old)...)
	f.markDirty(old, size)
}

// clone returns an independent copy of p's files, for a test that damages
// a disk and must not damage the one it goes on with.
func (p *powerFS) clone() *powerFS {
	c := *p
	files := map[*simFile]*simFile{}
	copyOf := func(f *simFile) *simFile {
		if g, ok := files[f]; ok {
			return g
		}
		g := &simFile{data: slices.Clone(f.data), disk: slices.Clone(f.disk), dirty: slices.Clone(f.dirty)}
		files[f] = g
		return g
	}
	c.names, c.durable = map[string]*simFile{}, map[string]*simFile{}
	for name, f := range p.names {
		c.names[name] = copyOf(f)
	}
	for name, f := range p.durable {
		c.durable[name] = copyOf(f)
	}
	c.pending = nil
	for _, ch := range p.pending {
		c.pending = append(c.pending, nameChange{from: ch.from, to: ch.to, file: copyOf(ch.file)})
	}
	return &c
}

// simHandle is an open powerFS file.
type simHandle struct {
	fs   *powerFS
	f    *simFile
	path string
	gen  int
	pos  int64 // for Write
}

func (h *simHandle) alive() error {
	if h.fs.cut || h.gen != h.fs.gen {
		return errPowerCut
	}
	return nil
}

func (h *simHandle) Name() string { return h.path }

func (h *simHandle) ReadAt(b []byte, off int64) (int, error) {
	if err := h.alive(); err != nil {
		return 0, err
	}
	if off >= int64(len(h.f.data)) {
		return 0, io.EOF
	}
	n := copy(b, h.f.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (h *simHandle) WriteAt(b []byte, off int64) (int, error) {
	if err := h.alive(); err != nil {
		return 0, err
	}
	if err := h.fs.step(); err != nil {
		// The power went out during the write: some of it landed.
		b = b[:h.fs.rng.IntN(len(b)+1)]
		h.write(b, off)
		return len(b), err
	}
	h.write(b, off)
	return len(b), nil
}

func (h *simHandle) write(b []byte, off int64) {
	end := int(off) + len(b)
	if end > len(h.f.data) {
		h.f.resize(end)
	}
	copy(h.f.data[off:], b)
	h.f.markDirty(int(off), end)
}

func (h *simHandle) Write(b []byte) (int, error) {
	n, err := h.WriteAt(b, h.pos)
	h.pos += int64(n)
	return n, err
}

func (h *simHandle) Size() (int64, error) {
	if err := h.alive(); err != nil {
		return 0, err
	}
	return int64(len(h.f.data)), nil
}

func (h *simHandle) Truncate(size int64) error {
	if err := h.alive(); err != nil {
		return err
	}
	if err := h.fs.step(); err != nil {
		return err
	}
	h.f.resize(int(size))
	return nil
}

func (h *simHandle) Sync() error {
	if err := h.alive(); err != nil {
		return err
	}
	if err := h.fs.step(); err != nil {
		return err
	}
	h.f.disk, h.f.dirty = slices.Clone(h.f.data), nil
	return nil
}

// Datasync commits the file's size with its data, as fdatasync does.
func (h *simHandle) Datasync() error { return h.Sync() }

func (h *simHandle) Allocate(size int64) error {
	if err := h.alive(); err != nil {
		return err
	}
	if h.fs.noAllocate {
		return fmt.Errorf("%w: %s", errNoPreallocate, h.path)
	}
	if err := h.fs.step(); err != nil {
		return err
	}
	if int(size) > len(h.f.data) {
		h.f.resize(int(size))
	}
	return nil
}

func (h *simHandle) Close() error { return nil }
