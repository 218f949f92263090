package store

import (
	"io/fs"
	"path/filepath"
)

// dirSize sums the disk space of the files under dir. Badger preallocates
// its memtable and value log files sparsely, so the blocks a file occupies
// (where the platform tells them) say more than its length.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += diskUsage(info)
		return nil
	})
	return total, err
}
