package zab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
)

// epochFile holds the member's Zab epochs. acceptedEpoch is the highest
// epoch it has promised to follow; currentEpoch the highest it has
// synchronized with. A single member sets both together, but they are kept
// apart so replication can use the same file.
const epochFileName = "epoch"

type epochs struct {
	Accepted uint32
	Current  uint32
}

const (
	epochMagic    = "JZEP"
	epochFileSize = 4 + 4 + 4 + 4 // magic, accepted, current, crc
)

func encodeEpochs(e epochs) []byte {
	b := make([]byte, 0, epochFileSize)
	b = append(b, epochMagic...)
	b = binary.LittleEndian.AppendUint32(b, e.Accepted)
	b = binary.LittleEndian.AppendUint32(b, e.Current)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeEpochs(b []byte) (epochs, error) {
	if len(b) != epochFileSize || string(b[:4]) != epochMagic {
		return epochs{}, errors.New("not an epoch file")
	}
	if binary.LittleEndian.Uint32(b[12:]) != crc32.Checksum(b[:12], crcTable) {
		return epochs{}, errors.New("epoch file checksum mismatch")
	}
	return epochs{
		Accepted: binary.LittleEndian.Uint32(b[4:]),
		Current:  binary.LittleEndian.Uint32(b[8:]),
	}, nil
}

// readEpochs returns the persisted epochs, or zero epochs for a new log.
func readEpochs(dir string) (epochs, error) {
	b, err := osFS{}.ReadFile(filepath.Join(dir, epochFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return epochs{}, nil
	}
	if err != nil {
		return epochs{}, fmt.Errorf("read epoch file: %w", err)
	}
	e, err := decodeEpochs(b)
	if err != nil {
		// The file is replaced atomically, so damage is not a torn write.
		return epochs{}, fmt.Errorf("epoch file %s: %w", filepath.Join(dir, epochFileName), err)
	}
	return e, nil
}

// writeEpochs persists e durably; it returns only once e is on disk.
func writeEpochs(dir string, e epochs) error {
	if err := writeFileAtomic(osFS{}, filepath.Join(dir, epochFileName), encodeEpochs(e)); err != nil {
		return fmt.Errorf("persist epochs: %w", err)
	}
	return nil
}
