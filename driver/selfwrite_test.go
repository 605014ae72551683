package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// awsLike behaves as the existing AWS provider does in its default mode:
// it returns no files; an object whose version the request says is
// mounted already is read back from target_path (the call fails when it
// cannot be), the others are fetched; then every file is written into
// target_path as a temporary file renamed over its name.
type awsLike struct {
	objects map[string][2]string // name -> version, content
	// during runs in the call, before anything is written.
	during       func(req *v1alpha1.MountRequest) error
	reads, calls int
}

// Unpublish answers as the AWS provider does: without keymount's extension.
func (p *awsLike) Unpublish(context.Context, string, *keymountv1.UnpublishRequest) error {
	return errNoExtension()
}

// Version answers as a provider that is up.
func (p *awsLike) Version(context.Context, string) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "aws-like"}, nil
}

func (p *awsLike) Mount(_ context.Context, _ string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	p.calls++
	if p.during != nil {
		if err := p.during(req); err != nil {
			return nil, err
		}
	}
	current := map[string]string{}
	for _, ov := range req.GetCurrentObjectVersion() {
		current[ov.GetId()] = ov.GetVersion()
	}
	mode, err := strconv.ParseUint(req.GetPermission(), 10, 32)
	if err != nil {
		return nil, err
	}
	resp := &v1alpha1.MountResponse{}
	names := make([]string, 0, len(p.objects))
	for name := range p.objects {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		obj := p.objects[name]
		value := obj[1]
		if current[name] == obj[0] {
			b, err := os.ReadFile(filepath.Join(req.GetTargetPath(), name))
			if err != nil {
				return nil, fmt.Errorf("failed to reload %s from the mount: %w", name, err)
			}
			if string(b) != value {
				return nil, fmt.Errorf("reloaded %s = %q, want %q", name, b, value)
			}
			p.reads++
		}
		if err := writeRenamed(req.GetTargetPath(), name, value, os.FileMode(mode)); err != nil {
			return nil, err
		}
		resp.ObjectVersion = append(resp.ObjectVersion, &v1alpha1.ObjectVersion{Id: name, Version: obj[0]})
	}
	return resp, nil
}

func writeRenamed(dir, name, value string, mode os.FileMode) error {
	dst := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(name))
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(value)
	if err := errors.Join(err, tmp.Chmod(mode), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// checkTargetShowsVolume fails unless the target is the volume's
// read-only mount holding the files of one generation, as want says.
func checkTargetShowsVolume(target string, want map[string]string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return err
	}
	if st.Flags&unix.ST_RDONLY == 0 {
		return fmt.Errorf("the target %s is writable", target)
	}
	for name, value := range want {
		b, err := os.ReadFile(filepath.Join(target, name))
		if err != nil {
			return fmt.Errorf("the target shows no %s: %w", name, err)
		}
		if string(b) != value {
			return fmt.Errorf("the target shows %s = %q, want %q", name, b, value)
		}
	}
	return nil
}

func contentsOf(objects map[string][2]string) map[string]string {
	out := map[string]string{}
	for name, obj := range objects {
		out[name] = obj[1]
	}
	return out
}

// TestSelfWritingProviderRefreshesLikeUpstream: a provider that writes its
// own files and reads the unchanged ones back from target_path refreshes
// with every mix of changed and unchanged objects, as with the upstream
// driver: during each call target_path is a stage beside the target
// holding the volume's files, while the target itself shows the volume,
// read-only, with the previous generation; after it the target holds the
// new files, the record the new versions, and no stage is left.
func TestSelfWritingProviderRefreshesLikeUpstream(t *testing.T) {
	n := newTestNode(t)
	target := n.target("aws")
	p := &awsLike{objects: map[string][2]string{"a": {"1", "a1"}, "b": {"1", "b1"}, "nested/c": {"1", "c1"}}}
	n.srv.d.deps.Providers = p
	if err := n.publish(t, target); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	checkFile(t, target, "a", "a1", 0o644)
	shown := contentsOf(p.objects)
	for i := range 12 {
		// Change none, one, two or all of the objects.
		for j, name := range []string{"a", "b", "nested/c"} {
			if (i>>j)&1 == 1 || i%4 == 3 {
				p.objects[name] = [2]string{strconv.Itoa(i + 2), name + "-" + strconv.Itoa(i+2)}
			}
		}
		p.during = func(req *v1alpha1.MountRequest) error {
			if req.GetTargetPath() == target || filepath.Dir(req.GetTargetPath()) != filepath.Dir(target) ||
				!strings.HasPrefix(filepath.Base(req.GetTargetPath()), volume.StagePrefix) {
				return fmt.Errorf("target_path %s is not a stage beside the target", req.GetTargetPath())
			}
			return checkTargetShowsVolume(target, shown)
		}
		if err := n.publish(t, target); err != nil {
			t.Fatalf("refresh %d: %v", i, err)
		}
		rec, err := n.srv.d.deps.Volumes.Lookup("csi-aws").LoadRecord()
		if err != nil {
			t.Fatal(err)
		}
		if rec.LastError != "" || rec.Failures != 0 {
			t.Fatalf("refresh %d failed: %s", i, rec.LastError)
		}
		for _, o := range rec.Objects {
			if p.objects[o.ID][0] != o.Version {
				t.Errorf("refresh %d: recorded %s@%s, want version %s", i, o.ID, o.Version, p.objects[o.ID][0])
			}
		}
		shown = contentsOf(p.objects)
		if err := checkTargetShowsVolume(target, shown); err != nil {
			t.Fatalf("after refresh %d: %v", i, err)
		}
		checkSingleReadOnlyMount(t, target)
		checkNoStage(t, target)
	}
	if p.reads == 0 {
		t.Error("the provider never read an unchanged object back: the test proves nothing")
	}
}

func checkNoStage(t *testing.T, target string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(target))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), volume.StagePrefix) {
			t.Errorf("stage %s left beside the target", e.Name())
		}
	}
}

// TestStageOfAKilledDriverCleanedUp: a stage left beside the target (the
// driver was killed during a provider call) is removed by the next
// publish, which succeeds, and by unpublish, after which kubelet can
// remove the volume directory.
func TestStageOfAKilledDriverCleanedUp(t *testing.T) {
	for _, next := range []string{"publish", "unpublish"} {
		t.Run(next, func(t *testing.T) {
			n := newTestNode(t)
			target := n.target("killed")
			p := &awsLike{objects: map[string][2]string{"a": {"1", "a1"}}}
			n.srv.d.deps.Providers = p
			tg := parseTarget(t, n, target)
			// What a driver killed during a first publish's call leaves:
			// the stage, mounted, with what the provider wrote.
			if _, err := n.srv.d.deps.Volumes.Stage(tg, []volume.StagedFile{{Path: "a", Mode: 0o644, Contents: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
			if next == "publish" {
				if err := n.publish(t, target); err != nil {
					t.Fatalf("publish after the kill: %v", err)
				}
				checkFile(t, target, "a", "a1", 0o644)
				checkSingleReadOnlyMount(t, target)
			}
			if err := n.unpublish(t, target); err != nil {
				t.Fatalf("unpublish: %v", err)
			}
			checkNoStage(t, target)
			assertNoMountsUnder(t, filepath.Dir(target))
			// kubelet's removeMountDir: the mount dir if any, then the
			// volume directory (vol_data.json is not written here).
			if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Dir(target)); err != nil {
				t.Errorf("kubelet cannot remove the volume directory: %v", err)
			}
		})
	}
}

func (n *testNode) unpublish(t *testing.T, target string) error {
	t.Helper()
	_, err := n.srv.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{
		VolumeId: "csi-" + filepath.Base(filepath.Dir(target)), TargetPath: target,
	})
	return err
}

func parseTarget(t *testing.T, n *testNode, target string) *targetpath.Target {
	t.Helper()
	tg, err := targetpath.Parse(n.base, target, "uid")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
