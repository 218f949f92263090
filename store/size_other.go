//go:build !unix

package store

import "io/fs"

func diskUsage(info fs.FileInfo) int64 { return info.Size() }
