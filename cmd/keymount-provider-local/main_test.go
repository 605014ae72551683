package main

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/server"
)

func TestParseFlags(t *testing.T) {
	got := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), []string{"--root=/srv/secrets"})
	want := &config{
		root:   "/srv/secrets",
		server: server.Config{Name: "local", Version: version, SocketDir: "/var/run/secrets-store-csi-providers"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(config{})); diff != "" {
		t.Errorf("parseFlags (-want +got):\n%s", diff)
	}
}

func TestRunBadConfig(t *testing.T) {
	root := t.TempDir()
	dir := sockettest.Dir(t)
	// The provider kit creates a missing socket directory; one below a
	// regular file cannot be created.
	file := filepath.Join(sockettest.Dir(t), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no root", []string{"--provider-dir=" + dir}, "--root is required"},
		{"missing root", []string{"--root=" + filepath.Join(root, "nope"), "--provider-dir=" + dir}, "no such file or directory"},
		{"bad name", []string{"--root=" + root, "--provider-dir=" + dir, "--name=a.b"}, `provider name "a.b" must match`},
		{"provider dir cannot be created", []string{"--root=" + root, "--provider-dir=" + filepath.Join(file, "sub")}, "create socket directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), tc.args)
			// A config that wrongly starts serving ends with the deadline
			// (and a nil error), not with the test binary's timeout.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := run(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRunServesUntilCanceled(t *testing.T) {
	dir := sockettest.Dir(t)
	cfg := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), []string{"--root=" + t.TempDir(), "--provider-dir=" + dir})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()

	sock := filepath.Join(dir, "local.sock")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", sock, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run = %v after cancel, want nil", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}
