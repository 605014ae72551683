package targetpath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	const root = "/var/lib/kubelet"
	good := root + "/pods/uid-1/volumes/kubernetes.io~csi/secrets/mount"
	tg, err := Parse(root, good, "uid-1")
	if err != nil || tg.Volume != "secrets" || tg.PodUID != "uid-1" || tg.Path != good {
		t.Fatalf("Parse(good) = %+v, %v", tg, err)
	}
	bad := []struct{ path, uid string }{
		{good, ""},
		{good, "uid-2"},
		{good, "../uid-1"},
		{"relative/pods/uid-1/volumes/kubernetes.io~csi/secrets/mount", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/secrets/mount/", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/secrets/../secrets/mount", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/mount", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/./mount", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/../mount", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/a/b/mount", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/secrets/data", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~empty-dir/secrets/mount", "uid-1"},
		{root + "/pods/uid-1/volume-subpaths/x/mount", "uid-1"},
		{"/etc/kubernetes/pods/uid-1/volumes/kubernetes.io~csi/secrets/mount", "uid-1"},
		{"/var/lib/kubelet2/pods/uid-1/volumes/kubernetes.io~csi/secrets/mount", "uid-1"},
		{root + "/pods/uid-1/volumes/kubernetes.io~csi/sec\x00rets/mount", "uid-1"},
	}
	for _, tc := range bad {
		if _, err := Parse(root, tc.path, tc.uid); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q, uid %q) = %v, want ErrInvalid", tc.path, tc.uid, err)
		}
	}
}

func TestOpenFollowsNoSymlink(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	for i, elem := range []string{"pods", "pods/uid", "pods/uid/volumes", "pods/uid/volumes/kubernetes.io~csi",
		"pods/uid/volumes/kubernetes.io~csi/s", "pods/uid/volumes/kubernetes.io~csi/s/mount"} {
		r := filepath.Join(root, string(rune('a'+i)))
		if err := os.MkdirAll(r, 0o750); err != nil {
			t.Fatal(err)
		}
		// Every prefix up to elem is real; elem itself is a symlink out.
		parent := filepath.Join(r, filepath.Dir(elem))
		if err := os.MkdirAll(parent, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(r, elem)); err != nil {
			t.Fatal(err)
		}
		tg, err := Parse(r, filepath.Join(r, "pods/uid/volumes/kubernetes.io~csi/s/mount"), "uid")
		if err != nil {
			t.Fatal(err)
		}
		for _, create := range []bool{false, true} {
			if f, err := tg.Open(create); !errors.Is(err, ErrSymlink) {
				if f != nil {
					_ = f.Close()
				}
				t.Errorf("symlink at %s: Open(create=%v) = %v, want ErrSymlink", elem, create, err)
			}
		}
		if err := tg.RemoveDir(); err == nil && elem == "pods/uid/volumes/kubernetes.io~csi/s/mount" {
			if _, err := os.Lstat(filepath.Join(r, elem)); err != nil {
				t.Errorf("RemoveDir removed the symlink at %s", elem)
			}
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("something was created through a symlink: %v", entries)
	}
}

func TestOpenCreates(t *testing.T) {
	root := t.TempDir()
	tg, err := Parse(root, filepath.Join(root, "pods/uid/volumes/kubernetes.io~csi/s/mount"), "uid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Open(false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open(false) of a missing target = %v, want ErrNotExist", err)
	}
	f, err := tg.Open(true)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if fi, err := os.Stat(tg.Path); err != nil || !fi.IsDir() {
		t.Fatalf("target not created: %v", err)
	}
	if err := tg.RemoveDir(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tg.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("RemoveDir left the target")
	}
	if err := tg.RemoveDir(); err != nil {
		t.Fatalf("RemoveDir of a missing target: %v", err)
	}
}

func TestPodUIDOf(t *testing.T) {
	if got := PodUIDOf("/k", "/k/pods/abc/volumes/x"); got != "abc" {
		t.Errorf("PodUIDOf = %q", got)
	}
	if got := PodUIDOf("/k", "/other/pods/abc"); got != "" {
		t.Errorf("PodUIDOf outside = %q", got)
	}
}
