package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// TestPodDeletion follows a Secret two pods share through their deletion.
// The first pod goes the normal way (kubelet unpublishes, then removes the
// pod): its pod status goes with the unpublish, and the garbage collector
// drops its owner reference from the Secret, which the second pod keeps.
// The second pod's node is lost (the pod is removed without an unpublish):
// the garbage collector deletes its pod status and the Secret, whose last
// owner it was; when the node comes back, kubelet's unpublish cleans up.
func TestPodDeletion(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	token := []byte("shared-" + randomHex(8))
	n.writeObject(t, "token", token)
	spc := n.createClass(t, ns, "shared", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "shared", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	first := n.createPod(t, ns, "first", secretsVolume{name: "secrets", class: "shared"})
	second := n.createPod(t, ns, "second", secretsVolume{name: "secrets", class: "shared"})
	n.mustPublish(t, first, "secrets")
	n.mustPublish(t, second, "secrets")

	n.s.waitForSecret(t, ns, "shared", syncedMeta("shared", first, second), hasData(map[string][]byte{"token": token}))
	n.checkPodStatus(t, first, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": token},
		synced: metav1.ConditionTrue})

	n.deletePod(t, first, "secrets") // waits for the pod status to go with the unpublish
	poll.Until(t, "the garbage collector to drop the deleted pod's owner reference from Secret shared",
		func(context.Context) (bool, error) {
			sec := n.s.secret(t, ns, "shared")
			if sec == nil {
				return false, errors.New("the Secret was deleted while pod second still uses it")
			}
			return slices.Equal(ownerUIDs(sec.OwnerReferences), uids(second)), nil
		})
	n.checkPodStatus(t, second, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": token},
		synced: metav1.ConditionTrue})
	if got := readFile(t, n.targetPath(second, "secrets"), "token"); got != string(token) {
		t.Errorf("token of pod second = %q, want %q", got, token)
	}

	n.deletePod(t, second) // its node is gone: nothing unpublishes it
	poll.Until(t, "the garbage collector to delete the pod status and the Secret of the deleted pod",
		func(context.Context) (bool, error) {
			return n.s.podStatus(t, second, "shared") == nil && n.s.secret(t, ns, "shared") == nil, nil
		})

	// The node is back: kubelet unpublishes the volumes of pods it no
	// longer has. The driver looks for the pod status to delete (a request
	// the audit log shows) and must bring nothing back.
	mark := n.s.auditMark(t)
	n.mustUnpublish(t, second, "secrets")
	n.s.waitForRequest(t, driverUser, mark, "the driver to look for the pod status of the unpublished volume",
		aboutStatus(second, "shared"))
	if ms := mountsUnder(t, n.dir); len(ms) > 0 {
		t.Errorf("mounts left after the unpublish: %v", ms)
	}
	if sec := n.s.secret(t, ns, "shared"); sec != nil {
		t.Errorf("the unpublish of a deleted pod brought Secret shared back: %v", fmt.Sprint(sec.OwnerReferences))
	}
	if st := n.s.podStatus(t, second, "shared"); st != nil {
		t.Errorf("the unpublish of a deleted pod brought its pod status back: %s", st.Name)
	}
}
