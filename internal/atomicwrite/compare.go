package atomicwrite

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// errDiffers stops the walk of holds at the first difference.
var errDiffers = errors.New("generation differs")

// holds reports whether the generation directory genPath holds exactly want
// (same paths, modes and bytes), with every directory and file, genPath
// included, in group gid (any group for keepGroup). It reads one file at a
// time, in chunks, so that comparing a large volume costs no more memory
// than a buffer.
func holds(genPath string, want []File, gid int) (bool, error) {
	byPath := make(map[string]*File, len(want))
	for i := range want {
		byPath[want[i].Path] = &want[i]
	}
	root, err := os.OpenRoot(genPath)
	if err != nil {
		return false, err
	}
	defer func() { _ = root.Close() }()
	buf := make([]byte, 32<<10)
	seen := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return dirInGroup(d, gid)
		}
		f := byPath[p]
		if f == nil || !d.Type().IsRegular() {
			return errDiffers
		}
		seen++
		return sameAs(root, d, f, gid, buf)
	})
	switch {
	case errors.Is(err, errDiffers):
		return false, nil
	case err != nil:
		return false, err
	}
	return seen == len(want), nil
}

// dirInGroup returns errDiffers unless the directory d is in group gid.
// Without a group to check it stats nothing.
func dirInGroup(d fs.DirEntry, gid int) error {
	if gid == keepGroup {
		return nil
	}
	fi, err := d.Info()
	if err != nil {
		return err
	}
	if !inGroup(fi, gid) {
		return errDiffers
	}
	return nil
}

// sameAs returns errDiffers unless the file d at f.Path has f's mode and
// bytes, and is in group gid.
func sameAs(root *os.Root, d fs.DirEntry, f *File, gid int, buf []byte) error {
	fi, err := d.Info()
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != f.Mode || fi.Size() != int64(len(f.Contents)) || !inGroup(fi, gid) {
		return errDiffers
	}
	in, err := root.Open(filepath.FromSlash(f.Path))
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	rest := f.Contents
	for {
		n, err := in.Read(buf)
		if n > len(rest) || !bytes.Equal(buf[:n], rest[:n]) {
			return errDiffers
		}
		rest = rest[n:]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if len(rest) != 0 {
		return errDiffers
	}
	return nil
}
