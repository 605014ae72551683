package unixsocket

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
)

// staleSocket leaves a socket file at path that nobody listens on, as a
// process that died without cleaning up does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// liveSocket serves on path until the test ends.
func liveSocket(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// busySocket listens on path with a backlog of zero and fills it, so that a
// further connect fails with EAGAIN instead of succeeding or being refused.
func busySocket(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("first connection to the busy socket: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
}

// assertServes checks that a connection to path reaches l: l echoes the
// byte the client sends. Connections that close without sending (such as
// Listen's probe) are skipped.
func assertServes(t *testing.T, path string, l net.Listener) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	served := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				served <- err
				return
			}
			b := make([]byte, 1)
			_ = c.SetDeadline(deadline)
			_, err = c.Read(b)
			if err == nil {
				_, err = c.Write(b)
			}
			_ = c.Close()
			if !errors.Is(err, io.EOF) {
				served <- err
				return
			}
		}
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	b := []byte("x")
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write to %s: %v", path, err)
	}
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "x" {
		t.Errorf("echo from %s = %q, %v; want the byte sent", path, b, err)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func TestListen(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares path and returns what to check after Listen.
		setup   func(t *testing.T, path string) func(t *testing.T)
		wantErr string
		wantIs  error
	}{
		{
			name:  "nothing there",
			setup: func(*testing.T, string) func(*testing.T) { return func(*testing.T) {} },
		},
		{
			name: "stale socket replaced",
			setup: func(t *testing.T, path string) func(*testing.T) {
				staleSocket(t, path)
				return func(*testing.T) {}
			},
		},
		{
			name: "live socket left serving",
			setup: func(t *testing.T, path string) func(*testing.T) {
				l := liveSocket(t, path)
				return func(t *testing.T) { assertServes(t, path, l) }
			},
			wantErr: "another process is serving on",
			wantIs:  ErrInUse,
		},
		{
			name: "busy socket left in place",
			setup: func(t *testing.T, path string) func(*testing.T) {
				busySocket(t, path)
				return func(t *testing.T) { assertType(t, path, fs.ModeSocket) }
			},
			wantErr: "left it in place",
		},
		{
			name: "regular file kept",
			setup: func(t *testing.T, path string) func(*testing.T) {
				if err := os.WriteFile(path, []byte("mine"), 0o600); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if b, err := os.ReadFile(path); err != nil || string(b) != "mine" {
						t.Errorf("file = %q, %v; want it untouched", b, err)
					}
				}
			},
			wantErr: "is a regular file, not a socket: remove it or choose another endpoint",
		},
		{
			name: "directory kept",
			setup: func(t *testing.T, path string) func(*testing.T) {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) { assertType(t, path, fs.ModeDir) }
			},
			wantErr: "is a directory, not a socket",
		},
		{
			name: "symlink to a stale socket kept",
			setup: func(t *testing.T, path string) func(*testing.T) {
				target := path + ".target"
				staleSocket(t, target)
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					assertType(t, path, fs.ModeSymlink)
					assertType(t, target, fs.ModeSocket)
				}
			},
			wantErr: "is a symlink, not a socket",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := sockettest.Path(t, "s.sock")
			check := tc.setup(t, path)
			l, err := Listen(path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Listen: %v", err)
				}
				t.Cleanup(func() { _ = l.Close() })
				assertServes(t, path, l)
			} else {
				if err == nil {
					_ = l.Close()
					t.Fatalf("Listen succeeded, want an error containing %q", tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Errorf("Listen = %v, want an error naming %s and containing %q", err, path, tc.wantErr)
				}
				if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
					t.Errorf("Listen = %v, want it to wrap %v", err, tc.wantIs)
				}
				if tc.wantIs == nil && errors.Is(err, ErrInUse) {
					t.Errorf("Listen = %v, must not wrap ErrInUse", err)
				}
			}
			check(t)
		})
	}
}

func assertType(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s is gone: %v", path, err)
	}
	if got := fi.Mode().Type(); got != want {
		t.Errorf("%s has type %v, want %v", path, got, want)
	}
}

func TestListenCreatesParentDirectory(t *testing.T) {
	dir := filepath.Join(sockettest.Dir(t), "a", "b")
	l, err := Listen(filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != socketDirMode&^currentUmask() {
		t.Errorf("directory mode = %v, want %v", got, socketDirMode&^currentUmask())
	}
}

// currentUmask reads the process umask (it can only be read by setting it).
func currentUmask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

func TestListenConcurrent(t *testing.T) {
	path := sockettest.Path(t, "s.sock")
	staleSocket(t, path)

	const n = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		listeners []net.Listener
		inUse     int
	)
	for range n {
		wg.Go(func() {
			l, err := Listen(path)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				listeners = append(listeners, l)
			case errors.Is(err, ErrInUse):
				inUse++
			default:
				t.Errorf("Listen: %v", err)
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	})
	if len(listeners) != 1 || inUse != n-1 {
		t.Fatalf("%d Listen calls succeeded and %d got ErrInUse, want 1 and %d", len(listeners), inUse, n-1)
	}
	assertServes(t, path, listeners[0])
}

func TestClose(t *testing.T) {
	tests := []struct {
		name string
		// between runs after Listen and before Close; it returns the
		// listener expected to serve on path after Close, if any.
		between  func(t *testing.T, path string) net.Listener
		wantGone bool
	}{
		{
			name:     "own socket removed",
			between:  func(*testing.T, string) net.Listener { return nil },
			wantGone: true,
		},
		{
			name: "successor's socket kept",
			between: func(t *testing.T, path string) net.Listener {
				// Someone removed the socket and a new instance bound the path.
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				next, err := Listen(path)
				if err != nil {
					t.Fatalf("successor Listen: %v", err)
				}
				t.Cleanup(func() { _ = next.Close() })
				return next
			},
		},
		{
			name: "already removed",
			between: func(t *testing.T, path string) net.Listener {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantGone: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := sockettest.Path(t, "s.sock")
			l, err := Listen(path)
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			next := tc.between(t, path)
			if err := l.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
			}
			if _, err := os.Lstat(path); tc.wantGone != errors.Is(err, fs.ErrNotExist) {
				t.Errorf("after Close, Lstat(%s) = %v; want gone = %v", path, err, tc.wantGone)
			}
			if next != nil {
				assertServes(t, path, next)
			}
		})
	}
}
