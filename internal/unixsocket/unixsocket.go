package unixsocket

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// socketDirMode is the mode of a parent directory Listen creates.
	socketDirMode os.FileMode = 0o750
	// probeTimeout bounds the dial that tells a live socket from a stale one.
	probeTimeout = time.Second
)

// ErrInUse is wrapped when another process is serving on the socket path.
var ErrInUse = errors.New("socket in use")

// Listen listens on the unix socket path. A stale socket at path is
// replaced; a socket another process serves on is left alone and the error
// wraps ErrInUse; anything else at path is an error. The listener is a
// *Listener: closing it removes the socket if path still names it, and it
// may be closed more than once.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, socketDirMode); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if err := removeStale(path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// Close removes the path itself, and only if it is still this socket.
	l.SetUnlinkOnClose(false)
	fi, err := os.Lstat(path)
	if err != nil {
		_ = l.Close() // the stat error is the one to report
		return nil, fmt.Errorf("stat new socket: %w", err)
	}
	own := &Listener{UnixListener: l, path: path, fi: fi}
	own.close = sync.OnceValue(own.closeAndRemove)
	return own, nil
}

// Listener is the listener Listen returns.
type Listener struct {
	*net.UnixListener

	path  string
	fi    os.FileInfo // the socket file right after it was created
	close func() error
}

var _ net.Listener = (*Listener)(nil)

// Close removes the socket file if path still names the socket this
// listener created, then closes the listener. It may be called more than
// once; every call returns the first call's result.
func (l *Listener) Close() error {
	return l.close()
}

// Present reports whether the socket path still names the socket this
// listener created (it was not removed or replaced by someone else).
func (l *Listener) Present() bool {
	fi, err := os.Lstat(l.path)
	return err == nil && os.SameFile(fi, l.fi)
}

// closeAndRemove removes before it closes: while the listener is open its
// socket inode stays allocated, so no other file at path can have the same
// inode number and the os.SameFile check cannot be fooled by inode reuse.
func (l *Listener) closeAndRemove() error {
	var rerr error
	if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.fi) {
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			rerr = fmt.Errorf("remove socket: %w", err)
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		rerr = fmt.Errorf("check socket before removing it: %w", err)
	}
	return errors.Join(rerr, l.UnixListener.Close())
}

// removeStale removes path if it is a socket nobody listens on. It returns
// nil when path does not exist.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("check socket path: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s exists and is a %s, not a socket: remove it or choose another endpoint", path, kind(fi.Mode()))
	}

	conn, err := net.DialTimeout("unix", path, probeTimeout)
	switch {
	case err == nil:
		_ = conn.Close() // only the successful dial matters
		return fmt.Errorf("another process is serving on %s: stop it first or choose another endpoint: %w", path, ErrInUse)
	case !errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot tell whether a process serves on %s, left it in place: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// kind names the type of a file for an error message.
func kind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symlink"
	case fs.ModeNamedPipe:
		return "named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "device"
	default:
		return "file of mode " + m.Type().String()
	}
}

// lockDir takes an exclusive flock on dir, serializing the check, removal
// and bind of Listen calls on one directory; the returned func releases it.
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return func() { _ = unix.Close(fd) }, nil
}
