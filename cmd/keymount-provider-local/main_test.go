package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/providercmd"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

func TestParseFlags(t *testing.T) {
	got := mustParseFlags(t, []string{"--root=/srv/secrets"})
	want := &config{
		root:   "/srv/secrets",
		server: server.Config{Name: "local", Version: version, SocketDir: "/var/run/secrets-store-csi-providers"},
		probe:  providercmd.Probe{Timeout: providercmd.DefaultProbeTimeout},
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
			cfg := mustParseFlags(t, tc.args)
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
	cfg := mustParseFlags(t, []string{"--root=" + t.TempDir(), "--provider-dir=" + dir})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()

	sock := filepath.Join(dir, "local.sock")
	poll.UntilTrue(t, "something to listen on "+sock, func() bool {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run = %v after cancel, want nil", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

// TestRunAllowedNamespaces: with --allowed-namespaces the binary's provider
// serves, over its socket, pods of the listed namespaces and answers
// PermissionDenied for any other; a list that is no namespace names is
// refused at start.
func TestRunAllowedNamespaces(t *testing.T) {
	dir, err := os.MkdirTemp("", "km")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "password"), []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := mustParseFlags(t, []string{"--root=" + root, "--provider-dir=" + dir, "--allowed-namespaces=shop,Not_A_Namespace"})
	if err := run(t.Context(), bad); err == nil || !strings.Contains(err.Error(), `"Not_A_Namespace" is not a namespace name`) {
		t.Fatalf("run with a bad list = %v, want an error naming the entry", err)
	}

	cfg := mustParseFlags(t, []string{"--root=" + root, "--provider-dir=" + dir, "--allowed-namespaces= shop, ,demo"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v after cancel, want nil", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "local.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := v1alpha1.NewCSIDriverProviderClient(conn)
	for _, tc := range []struct {
		namespace string
		want      codes.Code
	}{{"shop", codes.OK}, {"demo", codes.OK}, {"attacker", codes.PermissionDenied}, {"", codes.PermissionDenied}} {
		attrs, err := json.Marshal(map[string]string{"objects": "- objectName: password", "csi.storage.k8s.io/pod.namespace": tc.namespace})
		if err != nil {
			t.Fatal(err)
		}
		// WaitForReady: the socket may not be listening yet.
		resp, err := client.Mount(t.Context(), &v1alpha1.MountRequest{Attributes: string(attrs), Secrets: "{}", Permission: "420"}, grpc.WaitForReady(true))
		if status.Code(err) != tc.want {
			t.Errorf("Mount for namespace %q = %v, want %v", tc.namespace, err, tc.want)
		}
		if tc.want != codes.OK && len(resp.GetFiles()) != 0 {
			t.Errorf("Mount for namespace %q returned files", tc.namespace)
		}
	}
}
