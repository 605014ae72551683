package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"

	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// waitCleanedUp waits until kubelet removed the deleted pod's directory,
// then checks that no mount is left under it or under the volume's state
// directory, and that the driver removed that state.
func waitCleanedUp(t *testing.T, n *nodeenv.Node, pod *corev1.Pod, stateDir string) {
	t.Helper()
	podDir := filepath.Join(n.KubeletRoot, "pods", string(pod.UID))
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(context.Context) (bool, error) {
		_, err := os.Stat(podDir)
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("waiting until the pod's directory %s on the node is gone: %v", podDir, err)
	}
	for _, dir := range []string{podDir, stateDir} {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 {
			t.Errorf("mounts left under %s: %d", dir, len(ms))
		}
	}
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the driver's state of the volume is still there: %v", err)
	}
}
