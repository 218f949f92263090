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

// Epochs are the two epochs a member persists: Accepted is the highest
// epoch it has promised to follow (acceptedEpoch), Current the epoch of the
// last leader it synchronized with (currentEpoch). Neither ever goes back.
type Epochs struct {
	Accepted uint32
	Current  uint32
}

const (
	epochMagic    = "JZEP"
	epochFileSize = 4 + 4 + 4 + 4 // magic, accepted, current, crc
)

func encodeEpochs(e Epochs) []byte {
	b := make([]byte, 0, epochFileSize)
	b = append(b, epochMagic...)
	b = binary.LittleEndian.AppendUint32(b, e.Accepted)
	b = binary.LittleEndian.AppendUint32(b, e.Current)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeEpochs(b []byte) (Epochs, error) {
	if len(b) != epochFileSize || string(b[:4]) != epochMagic {
		return Epochs{}, errors.New("not an epoch file")
	}
	if binary.LittleEndian.Uint32(b[12:]) != crc32.Checksum(b[:12], crcTable) {
		return Epochs{}, errors.New("epoch file checksum mismatch")
	}
	return Epochs{
		Accepted: binary.LittleEndian.Uint32(b[4:]),
		Current:  binary.LittleEndian.Uint32(b[8:]),
	}, nil
}

// readEpochs returns the persisted epochs, or zero epochs for a new log.
func readEpochs(dir string) (Epochs, error) {
	b, err := osFS{}.ReadFile(filepath.Join(dir, epochFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return Epochs{}, nil
	}
	if err != nil {
		return Epochs{}, fmt.Errorf("read epoch file: %w", err)
	}
	e, err := decodeEpochs(b)
	if err != nil {
		// The file is replaced atomically, so damage is not a torn write.
		return Epochs{}, fmt.Errorf("epoch file %s: %w", filepath.Join(dir, epochFileName), err)
	}
	return e, nil
}

// writeEpochs persists e durably; it returns only once e is on disk.
func writeEpochs(dir string, e Epochs) error {
	if err := writeFileAtomic(osFS{}, filepath.Join(dir, epochFileName), encodeEpochs(e)); err != nil {
		return fmt.Errorf("persist epochs: %w", err)
	}
	return nil
}

// membershipFileName holds the last committed configuration the member
// applied (Ready.Membership), next to the epoch file and replaced
// atomically like it. A member without one starts from its configured
// peers (version 0).
const membershipFileName = "membership"

// membershipMagic leads the file; membershipMagicNoTime led it before
// the file kept the entry's time, and is still read (time 0).
const (
	membershipMagic       = "JZM2"
	membershipMagicNoTime = "JZMB"
)

// encodeMembershipFile is the magic, the configuration's version, index
// and time, its entry encoding (EncodeMembership) and a checksum of all
// that.
func encodeMembershipFile(m Membership) []byte {
	b := append([]byte(nil), membershipMagic...)
	b = binary.LittleEndian.AppendUint64(b, m.Version)
	b = binary.LittleEndian.AppendUint64(b, m.Index)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Time))
	b = append(b, EncodeMembership(m)...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeMembershipFile(b []byte) (Membership, error) {
	head := 4 + 8 + 8
	if len(b) >= 4 && string(b[:4]) == membershipMagic {
		head += 8
	} else if len(b) < 4 || string(b[:4]) != membershipMagicNoTime {
		return Membership{}, errors.New("not a membership file")
	}
	if len(b) < head+4 {
		return Membership{}, errors.New("not a membership file")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return Membership{}, errors.New("membership file checksum mismatch")
	}
	m, err := decodeMembership(body[head:])
	if err != nil {
		return Membership{}, err
	}
	m.Version, m.Index = binary.LittleEndian.Uint64(b[4:]), binary.LittleEndian.Uint64(b[12:])
	if head > 20 {
		m.Time = int64(binary.LittleEndian.Uint64(b[20:]))
	}
	return m, nil
}

// readMembership returns the persisted configuration, or nil if the
// member never persisted one.
func readMembership(dir string) (*Membership, error) {
	path := filepath.Join(dir, membershipFileName)
	b, err := osFS{}.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read membership file: %w", err)
	}
	m, err := decodeMembershipFile(b)
	if err != nil {
		// Replaced atomically: damage is not a torn write.
		return nil, fmt.Errorf("membership file %s: %w", path, err)
	}
	return &m, nil
}

// writeMembership persists m durably; it returns only once m is on disk.
func writeMembership(dir string, m Membership) error {
	if err := writeFileAtomic(osFS{}, filepath.Join(dir, membershipFileName), encodeMembershipFile(m)); err != nil {
		return fmt.Errorf("persist membership %s: %w", m.String(), err)
	}
	return nil
}
