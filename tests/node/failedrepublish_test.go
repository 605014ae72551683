package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// republishTimeout bounds a wait for kubelet's next republish of a volume
// whose republish failed: kubelet retries it with a backoff that doubles up
// to 2m2s, so the wait is far longer than that.
const republishTimeout = 6 * time.Minute

// TestFailedRepublishOfUnmountedTarget: what each kubelet does when a
// republish fails, and that keymount serves the volume through it on both.
//
// kubelet republishes a running pod's volume (requiresRepublish) on every
// pod sync and retries a failed one with backoff. When a republish fails
// with a final error, kubelet before kubernetes/kubernetes#139045 removes
// the volume's mount directory, if nothing is mounted there, with its
// vol_data.json (kubernetes/kubernetes#121271); later kubelets keep them.
// keymount answers a republish whose fetch fails with OK (the pod keeps its
// files), so the failure here is one keymount does return: the class now
// names another provider (AlreadyExists), checked before anything is bound.
//
//  1. A pod reads v1.
//  2. Its class names another provider: the republish fails while the
//     target is mounted; no kubelet removes anything.
//  3. The target is unmounted on the node (a node agent's clean-up, or the
//     upstream driver's unpublish during a rollback) and the class names a
//     third provider, so the failure seen next came after the unmount: the
//     old kubelet has removed the mount directory, the new one kept it.
//  4. The class names its provider again and the object changes: kubelet's
//     retry republishes, keymount binds the target again (creating it where
//     kubelet removed it), the node and the running container read v2.
//  5. Deleting the pod unpublishes it and leaves nothing behind.
func TestFailedRepublishOfUnmountedTarget(t *testing.T) {
	t.Parallel()
	n := node(t)
	deletes := kubeletDeletesOnFailedRepublish(t, n)
	ns := namespace(t, n)
	v1, v2 := "v1-"+randomHex(8), "v2-"+randomHex(8)
	putObject(t, n, ns+"/api-key", v1)
	localClass(t, n, ns, "keys", `
- objectName: `+ns+`/api-key
  objectAlias: api-key
`)
	pod := createPod(t, n, ns, "app", "keys", "show", "-follow", mountPath+"/api-key")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the first value", hasContent("api-key", v1))
	target := n.TargetPath(pod, "secrets")
	stateDir := n.VolumeStateDir(volumeHandle(t, target))

	setProvider(t, n, ns, "keys", "elsewhere-a")
	waitFailedRepublish(t, n, pod, "elsewhere-a")
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("a failed republish of a mounted target removed it: %v", err)
	}

	unmountAll(t, target)
	setProvider(t, n, ns, "keys", "elsewhere-b")
	waitFailedRepublish(t, n, pod, "elsewhere-b")
	_, err := os.Stat(target)
	switch {
	case deletes && !errors.Is(err, os.ErrNotExist):
		t.Errorf("kubelet %s kept the mount directory of a failed republish (%v): it is recorded as removing it", n.KubeletVersion(t), err)
	case !deletes && err != nil:
		t.Errorf("kubelet %s removed the mount directory of a failed republish (%v): it is recorded as keeping it", n.KubeletVersion(t), err)
	}

	putObject(t, n, ns+"/api-key", v2)
	setProvider(t, n, ns, "keys", "local")
	waitTargetHolds(t, filepath.Join(target, "api-key"), v2)
	n.WaitLog(t, pod, "probe", "the value written after the failures", hasContent("api-key", v2))

	if err := n.Kube.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCleanedUp(t, n, pod, stateDir)
}

// kubeletDeletesOnFailedRepublish says whether the node's kubelet removes
// the mount directory of a volume whose republish failed.
func kubeletDeletesOnFailedRepublish(t *testing.T, n *nodeenv.Node) bool {
	t.Helper()
	deletes, err := deletesOnFailedRepublish(n.KubeletVersion(t))
	if err != nil {
		t.Fatal(err)
	}
	return deletes
}

// deletesOnFailedRepublish says whether kubelet version kv removes the
// mount directory of a volume whose republish failed: every release before
// kubernetes/kubernetes#139045 (opened 2026-05-13, in v1.37.0, cherry-picked
// to 1.34, 1.35 and 1.36 by #139230, #139229 and #139228). The patch
// releases of those minors listed here came out before the fix was written
// (v1.34.4's pkg/volume/csi/csi_mounter.go was read: it removes the
// directory on every final NodePublish error); any other patch release of
// theirs is an error until its source was read and it is listed.
func deletesOnFailedRepublish(kv string) (bool, error) {
	released := map[string]bool{"v1.34.4": true, "v1.35.4": true, "v1.36.1": true}
	v, err := version.ParseSemantic(kv)
	if err != nil {
		return false, fmt.Errorf("kubelet version %q: %w", kv, err)
	}
	switch {
	case v.AtLeast(version.MajorMinor(1, 37)):
		return false, nil
	case !v.AtLeast(version.MajorMinor(1, 34)):
		return true, nil
	case released[fmt.Sprintf("v%d.%d.%d", v.Major(), v.Minor(), v.Patch())]:
		return true, nil
	}
	return false, fmt.Errorf("kubelet %s: whether it removes the mount directory when a republish fails is not recorded: "+
		"read its pkg/volume/csi/csi_mounter.go (IsRemount skips the removal) and list it in deletesOnFailedRepublish", kv)
}

// TestDeletesOnFailedRepublish: the record of which kubelets remove the
// mount directory of a failed republish.
func TestDeletesOnFailedRepublish(t *testing.T) {
	for kv, want := range map[string]bool{
		"v1.33.13": true, "v1.34.4": true, "v1.35.4": true, "v1.36.1": true,
		"v1.37.0": false, "v1.37.1": false, "v1.38.0-beta.0": false,
	} {
		got, err := deletesOnFailedRepublish(kv)
		if err != nil || got != want {
			t.Errorf("deletesOnFailedRepublish(%s) = %v, %v; want %v", kv, got, err, want)
		}
	}
	for _, kv := range []string{"v1.34.9", "v1.36.3", "1.37"} {
		if _, err := deletesOnFailedRepublish(kv); err == nil {
			t.Errorf("deletesOnFailedRepublish(%s) answered for a release whose source was not read", kv)
		}
	}
}

// setProvider makes the class name provider.
func setProvider(t *testing.T, n *nodeenv.Node, ns, class, provider string) {
	t.Helper()
	spc := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: class}}
	patch := fmt.Sprintf(`{"spec":{"provider":%q}}`, provider)
	if err := n.Ctrl.Patch(t.Context(), spc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("set the provider of class %s/%s: %v", ns, class, err)
	}
}

// waitFailedRepublish waits for kubelet's FailedMount event on the pod whose
// message is keymount's AlreadyExists for a class naming provider, while
// making kubelet sync the pod (an annotation changes) every few seconds, as
// each sync republishes; kubelet's own retries of a failed republish come
// in between.
func waitFailedRepublish(t *testing.T, n *nodeenv.Node, pod *corev1.Pod, provider string) {
	t.Helper()
	var nudged time.Time
	nudges := 0
	err := poll.Wait(t.Context(), republishTimeout, func(ctx context.Context) (bool, error) {
		evs, err := n.Kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(pod.UID) + ",reason=FailedMount",
		})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "AlreadyExists") && strings.Contains(e.Message, strconv.Quote(provider)) {
				return true, nil
			}
		}
		if time.Since(nudged) >= 5*time.Second {
			nudges++
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"keymount-test/sync":"%d"}}}`, nudges)
			if _, err := n.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return false, err
			}
			nudged = time.Now()
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no failed republish of pod %s/%s for a class naming provider %q: %v\n%s\n%s",
			pod.Namespace, pod.Name, provider, err, n.LogTail("kubelet"), n.LogTail("keymount-driver"))
	}
}

// waitTargetHolds waits until the file on the node holds value.
func waitTargetHolds(t *testing.T, file, value string) {
	t.Helper()
	err := poll.Wait(t.Context(), republishTimeout, func(context.Context) (bool, error) {
		got, err := os.ReadFile(file)
		return err == nil && string(got) == value, nil
	})
	if err != nil {
		t.Fatalf("%s never held the new value: %v", file, err)
	}
}

// unmountAll unmounts path on the node until it is no mount point.
func unmountAll(t *testing.T, path string) {
	t.Helper()
	for {
		mounted, err := mountinfo.Mounted(path)
		if err != nil {
			t.Fatal(err)
		}
		if !mounted {
			return
		}
		if err := unix.Unmount(path, 0); err != nil {
			t.Fatalf("unmount %s on the node: %v", path, err)
		}
	}
}
