package local

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// rootDir is an open root directory.
type rootDir struct{ fd int }

// openRoot opens dir and checks that the kernel confines lookups under it
// (openat2, Linux 5.6 or later).
func openRoot(dir string) (*rootDir, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	d := &rootDir{fd: fd}
	probe, err := d.openat2(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		_ = d.close()
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("openat2 is not available (Linux 5.6 or later needed, and a seccomp profile that allows it): %w", err)
		}
		return nil, &os.PathError{Op: "openat2", Path: dir, Err: err}
	}
	_ = unix.Close(probe)
	return d, nil
}

func (d *rootDir) close() error { return unix.Close(d.fd) }

// openat2 opens name under the root, following symlinks only while they stay
// beneath it. It retries when a concurrent rename makes the kernel give up.
func (d *rootDir) openat2(name string, flags uint64) (int, error) {
	how := &unix.OpenHow{
		Flags:   flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	var err error
	for range 8 {
		var fd int
		fd, err = unix.Openat2(d.fd, name, how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
	return -1, err
}

// read returns the contents of the regular file name, at most limit bytes.
func (d *rootDir) read(name string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe must not wait for a writer.
	fd, err := d.openat2(name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, classify(err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer func() { _ = f.Close() }() // read-only

	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &notRegularError{typ: fi.Mode().Type()}
	}
	if fi.Size() > limit {
		return nil, errTooBig
	}
	// Sized from the file (plus one byte to notice it grew), not grown by
	// doubling: a 3.5 MiB object costs 3.5 MiB, not 7.
	in := io.LimitReader(f, limit+1)
	data := make([]byte, fi.Size()+1)
	n, err := io.ReadFull(in, data)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		data = data[:n]
	case err != nil:
		return nil, err
	default: // the file grew since Stat: read the rest
		rest, err := io.ReadAll(in)
		if err != nil {
			return nil, err
		}
		data = append(data, rest...)
	}
	if int64(len(data)) > limit {
		return nil, errTooBig
	}
	return data, nil
}

// classify maps an openat2 error to the package's platform-neutral errors.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return errMissing
	case errors.Is(err, unix.EXDEV):
		return errEscapes
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return errDenied
	case errors.Is(err, unix.ELOOP):
		return errLoop
	case errors.Is(err, unix.ENXIO): // a socket
		return &notRegularError{typ: os.ModeSocket}
	default:
		return fmt.Errorf("openat2: %w", err)
	}
}
