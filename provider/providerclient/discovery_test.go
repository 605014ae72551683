package providerclient

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bindSocket creates a unix socket at <dir>/<name>.sock that nobody serves.
// With keepFile the socket file outlives its listener, so connecting to it is
// refused.
func bindSocket(t *testing.T, dir, name string, keepFile bool) string {
	t.Helper()
	path := filepath.Join(dir, name+".sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	if keepFile {
		l.SetUnlinkOnClose(false)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t.Cleanup(func() { _ = l.Close() })
	return path
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSocketPath(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the two directories and returns the socket expected,
		// or "" when the provider must not be found.
		setup func(t *testing.T, first, second string) string
		// wantSkipped: the not-found message names second's aws.sock as
		// not a socket.
		wantSkipped bool
	}{
		{
			name: "first directory wins",
			setup: func(t *testing.T, first, second string) string {
				bindSocket(t, second, "aws", false)
				return bindSocket(t, first, "aws", false)
			},
		},
		{
			name: "found in second directory",
			setup: func(t *testing.T, _, second string) string {
				return bindSocket(t, second, "aws", false)
			},
		},
		{
			name: "non-socket file skipped",
			setup: func(t *testing.T, first, second string) string {
				writeFile(t, filepath.Join(first, "aws.sock"))
				return bindSocket(t, second, "aws", false)
			},
		},
		{
			name: "directory with that name skipped",
			setup: func(t *testing.T, first, second string) string {
				if err := os.Mkdir(filepath.Join(first, "aws.sock"), 0o700); err != nil {
					t.Fatal(err)
				}
				return bindSocket(t, second, "aws", false)
			},
		},
		{
			name: "other provider's socket does not count",
			setup: func(t *testing.T, first, _ string) string {
				bindSocket(t, first, "vault", false)
				return ""
			},
		},
		{
			name:  "missing everywhere",
			setup: func(*testing.T, string, string) string { return "" },
		},
		{
			name: "only a non-socket file",
			setup: func(t *testing.T, _, second string) string {
				writeFile(t, filepath.Join(second, "aws.sock"))
				return ""
			},
			wantSkipped: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second := tempDir(t), tempDir(t)
			want := tt.setup(t, first, second)
			c := newClient(t, Config{Dirs: []string{first, second}})

			got, err := c.SocketPath("aws")
			if want != "" {
				if err != nil || got != want {
					t.Fatalf("SocketPath() = %q, %v; want %q", got, err, want)
				}
				return
			}
			if !errors.Is(err, ErrProviderNotFound) {
				t.Fatalf("SocketPath() = %q, %v; want ErrProviderNotFound", got, err)
			}
			// The provider and every directory searched are named, in order.
			wantMsg := fmt.Sprintf(`provider "aws" not found: no socket aws.sock in %s, %s`, first, second)
			if tt.wantSkipped {
				wantMsg += fmt.Sprintf(" (skipped: %s is not a socket)", filepath.Join(second, "aws.sock"))
			}
			if err.Error() != wantMsg {
				t.Errorf("SocketPath() error = %q; want %q", err, wantMsg)
			}
		})
	}
}

func TestInvalidProviderName(t *testing.T) {
	dir := tempDir(t)
	c := newClient(t, Config{Dirs: []string{dir}})
	tests := []struct {
		name     string
		provider string
		wantMsg  string
	}{
		{name: "empty", provider: "", wantMsg: "spec.provider"},
		{name: "slash", provider: "a/b", wantMsg: `"a/b"`},
		{name: "parent directory", provider: "../x", wantMsg: `"../x"`},
		{name: "31 characters", provider: strings.Repeat("a", 31), wantMsg: "{0,30}"},
		{name: "space", provider: "a b", wantMsg: `"a b"`},
		{name: "dot", provider: "aws.v2", wantMsg: `"aws.v2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks := map[string]func() error{
				"SocketPath": func() error { _, err := c.SocketPath(tt.provider); return err },
				"Mount":      func() error { _, err := c.Mount(t.Context(), tt.provider, okMountRequest()); return err },
				"Version":    func() error { _, err := c.Version(t.Context(), tt.provider); return err },
			}
			for method, call := range checks {
				err := call()
				if !errors.Is(err, ErrInvalidProviderName) {
					t.Fatalf("%s(%q) error = %v; want ErrInvalidProviderName", method, tt.provider, err)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("%s(%q) error %q does not contain %q", method, tt.provider, err, tt.wantMsg)
				}
			}
		})
	}
}

func TestValidProviderNames(t *testing.T) {
	dir := tempDir(t)
	c := newClient(t, Config{Dirs: []string{dir}})
	for _, name := range []string{"aws", "azure_v2", "gcp-1", strings.Repeat("z", 30)} {
		t.Run(name, func(t *testing.T) {
			want := bindSocket(t, dir, name, false)
			if got, err := c.SocketPath(name); err != nil || got != want {
				t.Errorf("SocketPath(%q) = %q, %v; want %q", name, got, err, want)
			}
		})
	}
}

// TestRediscovery checks that every call looks the socket up again: a
// provider that appears in an earlier directory takes over at the next call.
func TestRediscovery(t *testing.T) {
	first, second := tempDir(t), tempDir(t)
	c := newClient(t, Config{Dirs: []string{first, second}})
	serve(t, second, "aws", &fakeProvider{runtime: "old"})

	resp, err := c.Version(t.Context(), "aws")
	if err != nil || resp.GetRuntimeName() != "old" {
		t.Fatalf("Version() = %v, %v; want runtime old", resp, err)
	}
	serve(t, first, "aws", &fakeProvider{runtime: "new"})
	resp, err = c.Version(t.Context(), "aws")
	if err != nil || resp.GetRuntimeName() != "new" {
		t.Fatalf("Version() after a socket appeared in %s = %v, %v; want runtime new", first, resp, err)
	}
}

// TestProviderRestart checks that a provider replaced on the same socket
// path is reached again through the existing connection.
func TestProviderRestart(t *testing.T) {
	dir := tempDir(t)
	c := newClient(t, Config{Dirs: []string{dir}})
	old := serve(t, dir, "aws", &fakeProvider{runtime: "old"})
	if _, err := c.Version(t.Context(), "aws"); err != nil {
		t.Fatalf("Version(): %v", err)
	}

	old.server.Stop() // closes the listener, which removes the socket
	if _, err := c.Version(t.Context(), "aws"); !errors.Is(err, ErrProviderNotFound) {
		t.Fatalf("Version() with the provider gone: %v; want ErrProviderNotFound", err)
	}

	serve(t, dir, "aws", &fakeProvider{runtime: "new"})
	resp, err := c.Version(t.Context(), "aws")
	if err != nil || resp.GetRuntimeName() != "new" {
		t.Fatalf("Version() after restart = %v, %v; want runtime new", resp, err)
	}
}

// TestFound: Found is true only for a provider whose socket a call found,
// and stays true after the socket is gone; a name without a socket, or an
// invalid one, is never found.
func TestFound(t *testing.T) {
	dir := tempDir(t)
	c := newClient(t, Config{Dirs: []string{dir}})
	socket := bindSocket(t, dir, "aws", true)
	if c.Found("aws") {
		t.Fatal("Found(aws) before any lookup: true, want false")
	}
	if _, err := c.SocketPath("aws"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"made-up", "../aws", ""} {
		if _, err := c.SocketPath(name); err == nil {
			t.Fatalf("SocketPath(%q): found, want an error", name)
		}
		if c.Found(name) {
			t.Errorf("Found(%q) = true for a provider without a socket", name)
		}
	}
	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SocketPath("aws"); err == nil {
		t.Fatal("SocketPath(aws) after its socket was removed: found")
	}
	if !c.Found("aws") {
		t.Error("Found(aws) = false after its socket was found once")
	}
}
