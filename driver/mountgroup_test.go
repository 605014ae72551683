package driver

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// Groups and users of the mount group tests: IDs no file of the machine is
// likely to have by accident.
const (
	podGroup   = 4242
	otherGroup = 4343
	podUser    = 4711
)

func withMountGroup(group string) func(*csi.NodePublishVolumeRequest) {
	return func(r *csi.NodePublishVolumeRequest) {
		r.VolumeCapability.GetMount().VolumeMountGroup = group
	}
}

// publishGroup publishes the test pod's volume at target as kubelet does
// for a pod whose fsGroup is group ("" for none).
func (n *testNode) publishGroup(t *testing.T, target, group string) error {
	t.Helper()
	req := validRequest()
	req.TargetPath = target
	req.VolumeContext[AttrClass] = "app"
	req.VolumeId = "csi-" + filepath.Base(filepath.Dir(target))
	withMountGroup(group)(req)
	_, err := n.srv.NodePublishVolume(t.Context(), req)
	return err
}

func (n *testNode) record(t *testing.T, target string) *volume.Record {
	t.Helper()
	rec, err := n.srv.d.deps.Volumes.Lookup("csi-" + filepath.Base(filepath.Dir(target))).LoadRecord()
	if err != nil || rec == nil {
		t.Fatalf("volume record: %v, %v", rec, err)
	}
	return rec
}

// groupFiles are provider files: read-only for owner and group, private to
// the owner, the default mode, and nested.
func groupFiles() []*v1alpha1.File {
	return []*v1alpha1.File{
		{Path: "token", Mode: 0o440, Contents: []byte("t1")},
		{Path: "private", Mode: 0o400, Contents: []byte("p1")},
		{Path: "config", Contents: []byte("c1")},
		{Path: "db/creds/password", Mode: 0o440, Contents: []byte("pw")},
	}
}

// statOf returns the owner, group and permission bits of p, not following
// a symlink.
func statOf(t *testing.T, p string) (uid, gid uint32, perm os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("%s: no stat_t", p)
	}
	return st.Uid, st.Gid, fi.Mode().Perm()
}

// checkOwnership asserts that what the pod sees at target (the volume root,
// the current generation, nested directories, every file) is owned by root
// and group gid; files with the mode the provider asked for, directories
// 0755 (group may list and search them).
func checkOwnership(t *testing.T, target string, gid uint32) {
	t.Helper()
	gen, err := os.Readlink(filepath.Join(target, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		".": 0o755, gen: 0o755, gen + "/db": 0o755, gen + "/db/creds": 0o755,
		gen + "/token": 0o440, gen + "/private": 0o400, gen + "/config": 0o644, gen + "/db/creds/password": 0o440,
	}
	for p, mode := range want {
		uid, g, perm := statOf(t, filepath.Join(target, p))
		if uid != 0 || g != gid || perm != mode {
			t.Errorf("%s: %d:%d %#o, want 0:%d %#o", p, uid, g, perm, gid, mode)
		}
	}
}

// readAs reads file name of the volume at target as a process with uid
// podUser, primary group podUser and the supplementary groups given, as a
// container user would. The volume is reached through a descriptor, so
// the test's own directories above it need no permissions for that user.
func readAs(t *testing.T, target, name string, groups ...uint32) (string, error) {
	t.Helper()
	dir, err := os.OpenFile(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dir.Close() }()
	cmd := exec.CommandContext(t.Context(), "cat", "/proc/self/fd/3/"+name)
	cmd.ExtraFiles = []*os.File{dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: podUser, Gid: podUser, Groups: groups}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.New(strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func TestNodeGetCapabilitiesVolumeMountGroup(t *testing.T) {
	resp, err := (&nodeServer{}).NodeGetCapabilities(t.Context(), &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[csi.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range resp.GetCapabilities() {
		got[c.GetRpc().GetType()] = true
	}
	for _, want := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS, csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP,
	} {
		if !got[want] {
			t.Errorf("capabilities %v lack %v", resp.GetCapabilities(), want)
		}
	}
}

func TestParseMountGroup(t *testing.T) {
	tests := []struct {
		in      string
		wantGID int
		wantStr string
		wantErr bool
	}{
		{in: "", wantGID: noMountGroup},
		{in: "0", wantGID: 0, wantStr: "0"},
		{in: "1000", wantGID: 1000, wantStr: "1000"},
		{in: "2147483647", wantGID: 2147483647, wantStr: "2147483647"},
		{in: "007", wantGID: 7, wantStr: "7"},
		{in: "2147483648", wantErr: true},
		{in: "4294967295", wantErr: true},
		{in: "99999999999999999999", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+5", wantErr: true},
		{in: " 5", wantErr: true},
		{in: "5\n", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "1_000", wantErr: true},
		{in: "1.0", wantErr: true},
		{in: "root", wantErr: true},
		{in: "1e3", wantErr: true},
	}
	for _, tc := range tests {
		req := validRequest()
		withMountGroup(tc.in)(req)
		p, err := parsePublishRequest(req, testKubeletRoot)
		if tc.wantErr {
			if !errors.Is(err, errInvalidRequest) || !strings.Contains(err.Error(), "volume_capability.mount.volume_mount_group") ||
				!strings.Contains(err.Error(), "fsGroup") {
				t.Errorf("%q: err = %v, want an invalid request naming the field and the fix", tc.in, err)
			}
			continue
		}
		if err != nil || p.gid != tc.wantGID || p.mountGroup != tc.wantStr {
			t.Errorf("%q: gid %d, group %q, err %v; want %d, %q", tc.in, p.gid, p.mountGroup, err, tc.wantGID, tc.wantStr)
		}
	}
}

// TestPublishMountGroup: with a volume_mount_group, every file and
// directory the pod sees belongs to that group with the modes asked for, so
// a non-root container user whose supplementary group is the fsGroup reads
// a 0440 file; one without it does not.
func TestPublishMountGroup(t *testing.T) {
	n := newTestNode(t)
	n.provider.files = groupFiles()
	target := n.target("secrets")
	if err := n.publishGroup(t, target, "4242"); err != nil {
		t.Fatal(err)
	}
	checkOwnership(t, target, podGroup)
	if got := n.record(t, target).MountGroup; got != "4242" {
		t.Errorf("recorded mount group %q, want 4242", got)
	}
	for _, name := range []string{"token", "db/creds/password"} {
		if _, err := readAs(t, target, name, podGroup); err != nil {
			t.Errorf("a user in the fsGroup cannot read %s: %v", name, err)
		}
		if got, err := readAs(t, target, name, otherGroup); err == nil {
			t.Errorf("a user outside the fsGroup read %s: %q", name, got)
		}
	}
	if got, err := readAs(t, target, "token", podGroup); err != nil || got != "t1" {
		t.Errorf("token read in the fsGroup = %q, %v; want t1", got, err)
	}
	if got, err := readAs(t, target, "private", podGroup); err == nil {
		t.Errorf("the 0400 file was readable by the group: %q", got)
	}
}

// TestPublishWithoutMountGroup: without a volume_mount_group files and
// directories stay in root's group, as before, and the record has none.
func TestPublishWithoutMountGroup(t *testing.T) {
	n := newTestNode(t)
	n.provider.files = groupFiles()
	target := n.target("secrets")
	if err := n.publishGroup(t, target, ""); err != nil {
		t.Fatal(err)
	}
	checkOwnership(t, target, 0)
	if got := n.record(t, target).MountGroup; got != "" {
		t.Errorf("recorded mount group %q, want none", got)
	}
	if got, err := readAs(t, target, "token", podGroup); err == nil {
		t.Errorf("a non-root user read a 0440 root:root file: %q", got)
	}
}

// TestPublishRejectsInvalidMountGroup: a volume_mount_group that is not a
// group ID fails with InvalidArgument naming the field, before the
// provider is called or anything is mounted.
func TestPublishRejectsInvalidMountGroup(t *testing.T) {
	n := newTestNode(t)
	n.provider.files = groupFiles()
	for _, bad := range []string{"-1", "2147483648", "abc", "+1", " 1", "1.5"} {
		target := n.target("secrets")
		err := n.publishGroup(t, target, bad)
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "volume_capability.mount.volume_mount_group") {
			t.Errorf("group %q: err = %v, want InvalidArgument naming volume_capability.mount.volume_mount_group", bad, err)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("group %q: target %s created", bad, target)
		}
		assertNoMountsUnder(t, n.base)
	}
	if n.provider.calls != 0 {
		t.Errorf("provider called %d times for invalid requests", n.provider.calls)
	}
}

// TestRepublishMountGroup: a republish with the same group keeps the
// generation; one with another group (or none, or a first one) writes the
// same files anew in the new group, a change like any other.
func TestRepublishMountGroup(t *testing.T) {
	tests := []struct {
		name        string
		first, then string
		wantGID     uint32
		wantChange  bool
	}{
		{name: "same group", first: "4242", then: "4242", wantGID: podGroup},
		{name: "same group spelled with zeros", first: "4242", then: "04242", wantGID: podGroup},
		{name: "no group either time", first: "", then: "", wantGID: 0},
		{name: "other group", first: "4242", then: "4343", wantGID: otherGroup, wantChange: true},
		{name: "group dropped", first: "4242", then: "", wantGID: 0, wantChange: true},
		{name: "group added", first: "", then: "4242", wantGID: podGroup, wantChange: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			n.provider.files = groupFiles()
			target := n.target("secrets")
			if err := n.publishGroup(t, target, tc.first); err != nil {
				t.Fatal(err)
			}
			before, err := os.Readlink(filepath.Join(target, "..data"))
			if err != nil {
				t.Fatal(err)
			}
			if err := n.publishGroup(t, target, tc.then); err != nil {
				t.Fatalf("republish: %v", err)
			}
			after, err := os.Readlink(filepath.Join(target, "..data"))
			if err != nil {
				t.Fatal(err)
			}
			rec := n.record(t, target)
			wantGen := int64(1)
			if tc.wantChange {
				wantGen = 2
			}
			if (after != before) != tc.wantChange || rec.Generation != wantGen {
				t.Errorf("generation %s -> %s, record generation %d; want changed=%t, generation %d",
					before, after, rec.Generation, tc.wantChange, wantGen)
			}
			checkOwnership(t, target, tc.wantGID)
			wantRec := strings.TrimLeft(tc.then, "0")
			if rec.MountGroup != wantRec || rec.LastError != "" {
				t.Errorf("record group %q, last error %q; want %q and none", rec.MountGroup, rec.LastError, wantRec)
			}
			if n.provider.calls != 2 {
				t.Errorf("provider called %d times, want 2", n.provider.calls)
			}
		})
	}
}
