package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
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

	sec := n.s.secret(t, ns, "shared")
	if sec == nil {
		t.Fatal("Secret shared was not synced")
	}
	checkSyncedMeta(t, sec, "shared", first, second)

	n.deletePod(t, first, "secrets")
	if st := n.s.podStatus(t, first, "shared"); st != nil {
		t.Errorf("pod status %s still exists after its volume was unpublished", st.Name)
	}
	waitFor(t, gcTimeout, "the garbage collector to drop the deleted pod's owner reference from Secret shared",
		func(context.Context) (bool, error) {
			sec := n.s.secret(t, ns, "shared")
			if sec == nil {
				return false, errors.New("the Secret was deleted while pod second still uses it")
			}
			return slices.Equal(ownerUIDs(sec.OwnerReferences), uids(second)), nil
		})
	n.checkPodStatus(t, second, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": token},
		synced: "True"})
	if got := readFile(t, n.targetPath(second, "secrets"), "token"); got != string(token) {
		t.Errorf("token of pod second = %q, want %q", got, token)
	}

	n.deletePod(t, second) // its node is gone: nothing unpublishes it
	waitFor(t, gcTimeout, "the garbage collector to delete the pod status and the Secret of the deleted pod",
		func(context.Context) (bool, error) {
			return n.s.podStatus(t, second, "shared") == nil && n.s.secret(t, ns, "shared") == nil, nil
		})

	// The node is back: kubelet unpublishes the volumes of pods it no
	// longer has.
	n.mustUnpublish(t, second, "secrets")
	if ms := mountsUnder(t, n.dir); len(ms) > 0 {
		t.Errorf("mounts left after the unpublish: %v", ms)
	}
	if sec := n.s.secret(t, ns, "shared"); sec != nil {
		t.Errorf("the unpublish of a deleted pod brought Secret shared back: %v", fmt.Sprint(sec.OwnerReferences))
	}
}
