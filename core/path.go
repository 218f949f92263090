package core

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// IsTreePath reports whether key is a path ZooKeeper accepts, by the rules of
// its PathUtils.validatePath: it starts with '/', has no empty, "." or ".."
// component, does not end in '/' (except the root itself), and contains no
// character ZooKeeper forbids. ZooKeeper checks UTF-16 code units, so a
// character outside the Basic Multilingual Plane (a surrogate pair there) and
// bytes that are not UTF-8 (decoded to U+FFFD) are refused too.
func IsTreePath(key []byte) bool {
	if len(key) == 0 || key[0] != '/' {
		return false
	}
	if len(key) == 1 {
		return true
	}
	// One pass: every create, setData and event checks its path, so a
	// second walk (components, then characters) showed in profiles.
	// ASCII bytes are judged as they are; the rest decoded rune by rune.
	start := 1 // the current component's first byte
	for i := 1; i < len(key); {
		b := key[i]
		if b == '/' {
			if !validComponent(key[start:i]) {
				return false
			}
			i++
			start = i
			continue
		}
		if b < utf8.RuneSelf {
			if !validPathRune(rune(b)) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(key[i:])
		if r == utf8.RuneError || !validPathRune(r) {
			return false
		}
		i += size
	}
	return validComponent(key[start:]) // empty when key ends in '/'
}

// validComponent reports whether one component of a tree path is allowed:
// neither empty nor "." nor "..".
func validComponent(c []byte) bool {
	return len(c) != 0 && string(c) != "." && string(c) != ".."
}

func validPathRune(r rune) bool {
	switch {
	case r == 0:
		return false
	case r > 0 && r <= 0x1f:
		return false
	case r >= 0x7f && r <= 0x9f:
		return false
	case r >= 0xd800 && r <= 0xf8ff:
		return false
	case r >= 0xfff0:
		return false
	}
	return true
}

// ParentPath returns the parent of a tree path ("/" for a top-level node) and
// false for the root.
func ParentPath(path []byte) ([]byte, bool) {
	if len(path) <= 1 {
		return nil, false
	}
	i := bytes.LastIndexByte(path, '/')
	if i <= 0 {
		return []byte{'/'}, true
	}
	return path[:i], true
}

// BaseName returns the last component of a tree path.
func BaseName(path []byte) []byte {
	i := bytes.LastIndexByte(path, '/')
	return path[i+1:]
}

// JoinPath returns parent + "/" + name for tree paths.
func JoinPath(parent, name []byte) []byte {
	out := make([]byte, 0, len(parent)+1+len(name))
	out = append(out, parent...)
	if len(parent) != 1 {
		out = append(out, '/')
	}
	return append(out, name...)
}

// RootPath is the tree's root, which always exists.
const RootPath = "/"

// AppendSequentialSuffix appends the suffix ZooKeeper gives the seq-th
// sequential child: Java's String.format("%010d"), ten digits zero-padded
// after the sign, so a counter that wrapped past 2^31-1 reads
// "-000000005" as ZooKeeper's does.
func AppendSequentialSuffix(b []byte, seq int32) []byte {
	return fmt.Appendf(b, "%010d", seq)
}
