package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/provider/server"
)

// Contents the tests look for in error messages: they must never appear.
const (
	password = "hunter2-password"
	outside  = "outside-secret"
)

// newRoot builds a root directory with every kind of entry the provider
// meets, and a secret file next to it, outside the root.
func newRoot(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	mustWrite(t, filepath.Join(base, "outside", "secret"), outside)
	mustWrite(t, filepath.Join(root, "db", "password"), password)
	mustWrite(t, filepath.Join(root, "tls.crt"), "CERT")
	mustWrite(t, filepath.Join(root, "big"), strings.Repeat("x", maxObjectSize+1))
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The layout of a Secret volume: relative symlinks through ..data.
	mustWrite(t, filepath.Join(root, "secretvol", "..2025_01_01", "key"), "from-secret-volume")
	mustSymlink(t, "..2025_01_01", filepath.Join(root, "secretvol", "..data"))
	mustSymlink(t, "..data/key", filepath.Join(root, "secretvol", "key"))

	mustSymlink(t, "db/password", filepath.Join(root, "link-inside"))
	mustSymlink(t, "../outside/secret", filepath.Join(root, "link-escape"))
	mustSymlink(t, filepath.Join(base, "outside", "secret"), filepath.Join(root, "link-absolute"))
	mustSymlink(t, "../outside", filepath.Join(root, "dir-escape"))
	mustSymlink(t, "loop-b", filepath.Join(root, "loop-a"))
	mustSymlink(t, "loop-a", filepath.Join(root, "loop-b"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

func mustWrite(t *testing.T, path, contents string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func hash(s string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))[:32]
}

func TestMount(t *testing.T) {
	p, err := New(newRoot(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	tests := []struct {
		name    string
		objects *string // nil: parameter absent
		perm    os.FileMode
		want    *server.MountResult
		kind    error  // sentinel the error must wrap; nil for a plain (Internal) error
		wantErr string // substring of the error
	}{
		{
			name: "aliases, nested alias and permissions",
			objects: ptr(`
- objectName: "db/password"
  objectAlias: "password"
- objectName: "tls.crt"
  objectAlias: "tls/tls.crt"
  filePermission: "0600"
`),
			perm: 0o644,
			want: &server.MountResult{
				Files: []server.File{
					{Path: "password", Mode: 0o644, Contents: []byte(password)},
					{Path: "tls/tls.crt", Mode: 0o600, Contents: []byte("CERT")},
				},
				Versions: []server.ObjectVersion{
					{ID: "db/password", Version: hash(password)},
					{ID: "tls.crt", Version: hash("CERT")},
				},
			},
		},
		{
			name:    "default alias and the request's permission",
			objects: ptr(`- objectName: db/password`),
			perm:    0o440,
			want: &server.MountResult{
				Files:    []server.File{{Path: "db/password", Mode: 0o440, Contents: []byte(password)}},
				Versions: []server.ObjectVersion{{ID: "db/password", Version: hash(password)}},
			},
		},
		{
			name:    "one object under two aliases is read and versioned once",
			objects: ptr(`[{objectName: tls.crt, objectAlias: a}, {objectName: tls.crt, objectAlias: b}]`),
			perm:    0o644,
			want: &server.MountResult{
				Files: []server.File{
					{Path: "a", Mode: 0o644, Contents: []byte("CERT")},
					{Path: "b", Mode: 0o644, Contents: []byte("CERT")},
				},
				Versions: []server.ObjectVersion{{ID: "tls.crt", Version: hash("CERT")}},
			},
		},
		{
			name:    "symlinks that stay inside the root",
			objects: ptr(`[{objectName: link-inside, objectAlias: a}, {objectName: secretvol/key, objectAlias: b}]`),
			perm:    0o644,
			want: &server.MountResult{
				Files: []server.File{
					{Path: "a", Mode: 0o644, Contents: []byte(password)},
					{Path: "b", Mode: 0o644, Contents: []byte("from-secret-volume")},
				},
				Versions: []server.ObjectVersion{
					{ID: "link-inside", Version: hash(password)},
					{ID: "secretvol/key", Version: hash("from-secret-volume")},
				},
			},
		},
		{
			name:    "missing object fails the whole mount",
			objects: ptr("- objectName: tls.crt\n- objectName: db/nope"),
			kind:    server.ErrNotFound,
			wantErr: `object "db/nope" not found under root`,
		},
		{
			name:    "a file used as a directory",
			objects: ptr("- objectName: tls.crt/key"),
			kind:    server.ErrNotFound,
			wantErr: `object "tls.crt/key" not found under root`,
		},
		{
			name:    "symlink escaping the root",
			objects: ptr("- objectName: link-escape"),
			kind:    server.ErrPermissionDenied,
			wantErr: `object "link-escape" resolves outside root`,
		},
		{
			name:    "absolute symlink",
			objects: ptr("- objectName: link-absolute"),
			kind:    server.ErrPermissionDenied,
			wantErr: `object "link-absolute" resolves outside root`,
		},
		{
			name:    "directory symlink escaping the root",
			objects: ptr("- objectName: dir-escape/secret"),
			kind:    server.ErrPermissionDenied,
			wantErr: `object "dir-escape/secret" resolves outside root`,
		},
		{
			name:    "symlink loop",
			objects: ptr("- objectName: loop-a"),
			kind:    server.ErrInvalidParameters,
			wantErr: `object "loop-a": too many levels of symbolic links`,
		},
		{
			name:    "absolute objectName",
			objects: ptr("- objectName: /etc/hostname"),
			kind:    server.ErrInvalidParameters,
			wantErr: `objects[0].objectName: "/etc/hostname" is absolute`,
		},
		{
			name:    "dotdot objectName",
			objects: ptr("- objectName: ../outside/secret"),
			kind:    server.ErrInvalidParameters,
			wantErr: `objects[0].objectName: "../outside/secret" has a ".." element`,
		},
		{
			name:    "directory object",
			objects: ptr("- objectName: dir"),
			kind:    server.ErrInvalidParameters,
			wantErr: `object "dir" is a directory, not a regular file`,
		},
		{
			name:    "named pipe object",
			objects: ptr("- objectName: fifo"),
			kind:    server.ErrInvalidParameters,
			wantErr: `object "fifo" is a named pipe, not a regular file`,
		},
		{
			name:    "object too large",
			objects: ptr("- objectName: big"),
			kind:    server.ErrInvalidParameters,
			wantErr: `object "big" is larger than the 4 MiB limit`,
		},
		{
			name:    "duplicate alias",
			objects: ptr("- {objectName: tls.crt, objectAlias: x}\n- {objectName: db/password, objectAlias: x}"),
			kind:    server.ErrInvalidParameters,
			wantErr: `objects[1].objectAlias: "x" is already used by objects[0]`,
		},
		{
			name:    "bad YAML",
			objects: ptr("- objectName: [tls.crt"),
			kind:    server.ErrInvalidParameters,
			wantErr: "objects is not valid YAML",
		},
		{
			name:    "bad permission",
			objects: ptr("- objectName: tls.crt\n  filePermission: \"abc\""),
			kind:    server.ErrInvalidParameters,
			wantErr: `objects[0].filePermission: "abc" is not an octal mode like "0644"`,
		},
		{
			name:    "no objects parameter",
			kind:    server.ErrInvalidParameters,
			wantErr: `parameter "objects" is not set`,
		},
		{
			name:    "empty objects",
			objects: ptr("[]"),
			kind:    server.ErrInvalidParameters,
			wantErr: "objects is empty",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]string{"secretProviderClass": "spc"}
			if tc.objects != nil {
				attrs["objects"] = *tc.objects
			}
			got, err := p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: tc.perm})
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Mount = %v, want an error", got)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not contain %q", err, tc.wantErr)
				}
				if !errors.Is(err, tc.kind) {
					t.Errorf("error %q does not wrap %v", err, tc.kind)
				}
				for _, secret := range []string{password, outside, "CERT"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q contains file contents", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Mount: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Mount (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestMountCanceled(t *testing.T) {
	p, err := New(newRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = p.Mount(ctx, &server.MountRequest{Attributes: map[string]string{"objects": "- objectName: tls.crt"}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Mount = %v, want context.Canceled", err)
	}
}

func TestMountSeesChanges(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "a"), "v1")
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	req := &server.MountRequest{Attributes: map[string]string{"objects": "- objectName: a"}, Permission: 0o644}
	first, err := p.Mount(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(root, "a"), "v2")
	second, err := p.Mount(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Versions[0].Version == second.Versions[0].Version {
		t.Errorf("version %s did not change with the contents", first.Versions[0].Version)
	}
	if !bytes.Equal(second.Files[0].Contents, []byte("v2")) {
		t.Errorf("contents = %q, want v2", second.Files[0].Contents)
	}
}

func TestNew(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	mustWrite(t, filepath.Join(dir, "a"), "x")
	mustSymlink(t, "dir", filepath.Join(base, "link"))
	mustSymlink(t, "nope", filepath.Join(base, "dangling"))
	mustSymlink(t, "dir/a", filepath.Join(base, "file-link"))

	p, err := New(filepath.Join(base, "link"))
	if err != nil {
		t.Fatalf("New(symlink to a directory): %v", err)
	}
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Root() != want {
		t.Errorf("Root = %q, want the resolved %q", p.Root(), want)
	}

	for name, root := range map[string]string{
		"empty":     "",
		"missing":   filepath.Join(base, "nope"),
		"a file":    filepath.Join(dir, "a"),
		"dangling":  filepath.Join(base, "dangling"),
		"file link": filepath.Join(base, "file-link"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(root); err == nil {
				t.Errorf("New(%q) succeeded", root)
			}
		})
	}
}
