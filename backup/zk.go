package backup

import "errors"

// RestoreZooKeeper restores a ZooKeeper data directory into a new data
// directory.
func RestoreZooKeeper(dir string, cfg RestoreConfig) (Summary, error) {
	return Summary{}, errors.New("backup: not yet")
}
