//go:build !linux

package local

import "errors"

// rootDir is unavailable: confining lookups under the root relies on Linux's
// openat2.
type rootDir struct{}

func openRoot(string) (*rootDir, error) {
	return nil, errors.New("the local provider needs Linux 5.6 or later (openat2)")
}

func (*rootDir) close() error { return nil }

func (*rootDir) read(string, int64) ([]byte, error) {
	return nil, errors.New("the local provider needs Linux 5.6 or later (openat2)")
}
