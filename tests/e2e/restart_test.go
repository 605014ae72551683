package e2e

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// TestDriverRestart kills the driver (SIGKILL) with a volume mounted and
// starts it again with the same directories: the pod keeps its files, a
// republish finds the volume and writes nothing, and after another kill the
// unpublish removes the target, every mount and the pod status from what is
// on disk alone.
func TestDriverRestart(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	content := []byte("durable-" + randomHex(8))
	n.writeObject(t, "durable", content)
	spc := n.createClass(t, ns, "durable", "local", []object{{name: "durable"}},
		&secretsstorev1.SecretObject{SecretName: "durable", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "durable", Key: "durable"}}})
	pod := n.createPod(t, ns, "survivor", secretsVolume{name: "secrets", class: "durable"})
	target := n.targetPath(pod, "secrets")
	n.mustPublish(t, pod, "secrets")
	st := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"durable": content},
		synced: metav1.ConditionTrue})
	sec := n.s.waitForSecret(t, ns, "durable", syncedMeta("durable", pod), hasData(map[string][]byte{"durable": content}))

	n.restartDriver(t)
	if got := readFile(t, target, "durable"); got != string(content) {
		t.Errorf("durable after the restart = %q, want %q", got, content)
	}
	if mountAt(t, target) == nil {
		t.Fatalf("the target is no longer a mount point after the restart")
	}
	n.republishUnchanged(t, pod, "secrets", st, sec)

	n.restartDriver(t)
	n.mustUnpublish(t, pod, "secrets")
	if ms := mountsUnder(t, n.dir); len(ms) > 0 {
		t.Errorf("mounts left after the unpublish: %v", ms)
	}
	n.s.waitForStatusGone(t, pod, "durable", "the unpublish")
}
