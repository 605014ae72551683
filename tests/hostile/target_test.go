package hostile_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/tests/harness"
)

// TestReadWriteVolumeRefused: a pod volume without readOnly: true is
// refused with InvalidArgument before anything is created or mounted.
func TestReadWriteVolumeRefused(t *testing.T) {
	n := startNode(t, harness.Options{})
	n.prov.set(answer(fileOf("ok", "v1")))
	v := n.NewVolume("secrets")
	err := n.Publish(t.Context(), v, className, false)
	assertCode(t, err, codes.InvalidArgument, "readOnly")
	assertNothingMade(t, n, v)
	if calls := n.prov.calls.Load(); calls != 0 {
		t.Errorf("the provider was called %d times for a refused request", calls)
	}
}

// TestTargetOfAnotherPodRefused: a target path under another pod's
// directory than the volume context's pod UID is refused, both ways round,
// and nothing is made under either pod.
func TestTargetOfAnotherPodRefused(t *testing.T) {
	n := startNode(t, harness.Options{})
	n.prov.set(answer(fileOf("ok", "v1")))
	mine, theirs := n.NewVolume("secrets"), n.NewVolume("secrets")

	req := n.PublishRequest(mine.ID, theirs.Target, className, true)
	req.VolumeContext[driver.AttrPodUID] = mine.Pod.UID
	_, err := n.Node.NodePublishVolume(t.Context(), req)
	assertCode(t, err, codes.InvalidArgument, mine.Pod.UID)

	req = n.PublishRequest(mine.ID, mine.Target, className, true)
	req.VolumeContext[driver.AttrPodUID] = theirs.Pod.UID
	_, err = n.Node.NodePublishVolume(t.Context(), req)
	assertCode(t, err, codes.InvalidArgument, theirs.Pod.UID)

	assertNothingMade(t, n, mine)
	assertNothingMade(t, n, theirs)
}

// TestTargetNotKubeletShapedRefused: target paths that are not
// <kubelet root>/pods/<pod UID>/volumes/kubernetes.io~csi/<volume>/mount
// are refused with InvalidArgument and nothing is created at them.
func TestTargetNotKubeletShapedRefused(t *testing.T) {
	n := startNode(t, harness.Options{})
	n.prov.set(answer(fileOf("ok", "v1")))
	v := n.NewVolume("secrets")
	pod := filepath.Join(n.TargetBase, "pods", v.Pod.UID)
	targets := map[string]string{
		"outside-root":   filepath.Join(n.Dir, "elsewhere", "mount"),
		"relative":       strings.TrimPrefix(v.Target, "/"),
		"parent-element": filepath.Join(pod, "volumes", "kubernetes.io~csi", "secrets", "..", "..", "..", "..", "..", "x", "mount"),
		"not-clean":      v.Target + "/",
		"other-plugin":   filepath.Join(pod, "volumes", "kubernetes.io~empty-dir", "secrets", "mount"),
		"not-mount":      filepath.Join(pod, "volumes", "kubernetes.io~csi", "secrets", "data"),
		"extra-element":  filepath.Join(v.Target, "x"),
		"volume-dotdot":  pod + "/volumes/kubernetes.io~csi/../mount",
		"no-volume-name": filepath.Join(pod, "volumes", "kubernetes.io~csi", "mount"),
		"kubelet-root":   n.TargetBase,
		"state-dir":      n.VolumeDir(v.ID),
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			_, err := n.Node.NodePublishVolume(t.Context(), n.PublishRequest(v.ID, target, className, true))
			// The request names the right pod UID, so only the shape is wrong.
			req := n.PublishRequest(v.ID, target, className, true)
			req.VolumeContext[driver.AttrPodUID] = v.Pod.UID
			_, err2 := n.Node.NodePublishVolume(t.Context(), req)
			assertCode(t, err, codes.InvalidArgument)
			assertCode(t, err2, codes.InvalidArgument)
		})
	}
	assertNothingMade(t, n, v)
	if _, err := os.Lstat(filepath.Join(n.Dir, "elsewhere")); err == nil {
		t.Errorf("a directory was created for a target outside the kubelet root")
	}
}

// TestSymlinkedKubeletDirsRefused: when any directory of the target path
// below the kubelet root is a symlink, publish is refused and nothing is
// created or mounted where the link points, although the whole path
// exists there.
func TestSymlinkedKubeletDirsRefused(t *testing.T) {
	levels := []string{"pods", "<uid>", "volumes", "kubernetes.io~csi", "secrets", "mount"}
	for i := range levels {
		t.Run(levels[i], func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(answer(fileOf("ok", "v1")))
			v := n.NewVolume("secrets")
			parts := strings.Split(strings.TrimPrefix(v.Target, n.TargetBase+"/"), "/")
			link := filepath.Join(append([]string{n.TargetBase}, parts[:i+1]...)...)
			// Where the link points, the rest of the path exists, so
			// following it would work.
			dest := filepath.Join(n.Dir, "elsewhere")
			if err := os.MkdirAll(filepath.Join(append([]string{dest}, parts[i+1:]...)...), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(dest, link); err != nil {
				t.Fatal(err)
			}
			before := tree(t, dest)

			err := n.publish(t, v)
			assertCode(t, err, codes.InvalidArgument, "symlink")
			assertNoMounts(t, n.Dir)
			assertStateEmpty(t, n.Harness)
			if diff := cmp.Diff(before, tree(t, dest)); diff != "" {
				t.Errorf("created through the symlink at %s (-before +after):\n%s", link, diff)
			}
			// Whatever unpublish answers, it must not act through the link.
			_, _ = n.Node.NodeUnpublishVolume(t.Context(), harness.UnpublishRequest(v.ID, v.Target))
			if diff := cmp.Diff(before, tree(t, dest)); diff != "" {
				t.Errorf("unpublish changed what the symlink points to (-before +after):\n%s", diff)
			}
		})
	}
}

// tree lists every path below dir, for before/after comparisons.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	slices.Sort(out)
	return out
}

// assertNothingMade checks that a refused request left nothing: no mount
// under the harness directory, no volume directory, no target.
func assertNothingMade(t *testing.T, n *node, v harness.Volume) {
	t.Helper()
	assertNoMounts(t, n.Dir)
	assertStateEmpty(t, n.Harness)
	if _, err := os.Lstat(v.Target); err == nil {
		t.Errorf("target %s was created for a refused request", v.Target)
	}
}
