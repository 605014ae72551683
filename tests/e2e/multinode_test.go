package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// TestSecretSharedAcrossNodes syncs one Secret from pods on two nodes. Each
// node's driver applies the owner references of its own pods under its own
// field manager, so neither removes the other's, and a content change
// applied from one node keeps both. Deleting the pod on one node leaves the
// Secret to the other.
func TestSecretSharedAcrossNodes(t *testing.T) {
	n1 := startNode(t, nodeOptions{})
	n2 := startNode(t, nodeOptions{})
	ns := n1.newNamespace(t)
	v1 := []byte("shared-v1-" + randomHex(8))
	for _, n := range []*node{n1, n2} { // one store seen from both nodes
		n.writeObject(t, "token", v1)
	}
	spc := n1.createClass(t, ns, "fleet", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "fleet", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	p1 := n1.createPod(t, ns, "on-node-1", secretsVolume{name: "secrets", class: "fleet"})
	p2 := n2.createPod(t, ns, "on-node-2", secretsVolume{name: "secrets", class: "fleet"})
	n1.mustPublish(t, p1, "secrets")
	n2.mustPublish(t, p2, "secrets")

	n1.s.waitForSecret(t, ns, "fleet", syncedMeta("fleet", p1, p2), hasData(map[string][]byte{"token": v1}))
	n1.checkPodStatus(t, p1, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": v1}, synced: metav1.ConditionTrue})
	n2.checkPodStatus(t, p2, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": v1}, synced: metav1.ConditionTrue})

	v2 := []byte("shared-v2-" + randomHex(8))
	for _, n := range []*node{n1, n2} {
		n.writeObject(t, "token", v2)
	}
	n1.mustPublish(t, p1, "secrets")
	n2.mustPublish(t, p2, "secrets")
	n1.checkPodStatus(t, p1, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": v2}, synced: metav1.ConditionTrue})
	n2.checkPodStatus(t, p2, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": v2}, synced: metav1.ConditionTrue})
	n1.s.waitForSecret(t, ns, "fleet", syncedMeta("fleet", p1, p2), hasData(map[string][]byte{"token": v2}))

	n1.deletePod(t, p1, "secrets")
	poll.Until(t, "the garbage collector to drop the deleted pod from Secret fleet", func(context.Context) (bool, error) {
		sec := n1.s.secret(t, ns, "fleet")
		return sec != nil && slices.Equal(ownerUIDs(sec.OwnerReferences), uids(p2)), nil
	})
	n2.mustUnpublish(t, p2, "secrets")
}

// TestPodRecreatedOnAnotherNode replays a StatefulSet pod moving: the pod
// is removed while its old node has not unpublished yet, the garbage
// collector deletes its pod status, the pod comes back under the same name
// on another node, and only then does the old node unpublish. The old
// node's driver must not delete the new pod's status, which has the same
// name.
func TestPodRecreatedOnAnotherNode(t *testing.T) {
	oldNode := startNode(t, nodeOptions{})
	newNode := startNode(t, nodeOptions{})
	ns := oldNode.newNamespace(t)
	content := []byte("db-" + randomHex(8))
	for _, n := range []*node{oldNode, newNode} {
		n.writeObject(t, "password", content)
	}
	spc := oldNode.createClass(t, ns, "db", "local", []object{{name: "password"}})
	before := oldNode.createPod(t, ns, "db-0", secretsVolume{name: "secrets", class: "db"})
	oldNode.mustPublish(t, before, "secrets")
	oldNode.checkPodStatus(t, before, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"password": content}})

	oldNode.deletePod(t, before) // the old node is slow: no unpublish yet
	poll.Until(t, "the garbage collector to delete the removed pod's status", func(context.Context) (bool, error) {
		return oldNode.s.podStatus(t, before, "db") == nil, nil
	})
	after := newNode.createPod(t, ns, "db-0", secretsVolume{name: "secrets", class: "db"})
	newNode.mustPublish(t, after, "secrets")
	newNode.checkPodStatus(t, after, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"password": content}})

	mark := oldNode.logMark(t)
	oldNode.mustUnpublish(t, before, "secrets")
	// The old node's driver deletes the status after answering: wait for
	// its word on it.
	const kept = "pod status belongs to another pod, keeping it"
	if got := oldNode.waitForStatusLogged(t, mark, before, "db", kept, "pod status deleted"); got != kept {
		t.Errorf("the old node's driver, unpublishing the removed pod's volume: %q, want %q", got, kept)
	}
	st := newNode.checkPodStatus(t, after, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"password": content}})
	if got := st.OwnerReferences; len(got) != 1 || got[0].UID != after.UID {
		t.Errorf("pod status owners = %v, want only the new pod %s", got, after.UID)
	}
	newNode.mustUnpublish(t, after, "secrets")
	newNode.s.waitForStatusGone(t, after, "db", "the new pod's unpublish")
}

// TestSecretNotRolledBackAcrossNodes: node 1 syncs the newest value of an
// object; node 2's provider then answers with an older one (from a cache,
// here its own store). Node 2's pod gets what its provider answered, but
// node 2 does not write it over the newer Secret, and its pod status says
// why.
func TestSecretNotRolledBackAcrossNodes(t *testing.T) {
	n1 := startNode(t, nodeOptions{})
	n2 := startNode(t, nodeOptions{})
	ns := n1.newNamespace(t)
	newer := []byte("fleet-v2-" + randomHex(8))
	older := []byte("fleet-v1-" + randomHex(8))
	n1.writeObject(t, "token", newer)
	n2.writeObject(t, "token", older)
	spc := n1.createClass(t, ns, "fleet", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "fleet", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	p1 := n1.createPod(t, ns, "on-node-1", secretsVolume{name: "secrets", class: "fleet"})
	p2 := n2.createPod(t, ns, "on-node-2", secretsVolume{name: "secrets", class: "fleet"})

	n1.mustPublish(t, p1, "secrets")
	n1.s.waitForSecret(t, ns, "fleet", syncedMeta("fleet", p1), hasData(map[string][]byte{"token": newer}))
	n2.mustPublish(t, p2, "secrets")
	if got := readFile(t, n2.targetPath(p2, "secrets"), "token"); got != string(older) {
		t.Errorf("node 2's pod reads %q, want what its provider answered", got)
	}
	st := n2.checkPodStatus(t, p2, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": older}, synced: metav1.ConditionTrue})
	synced := meta.FindStatusCondition(st.Status.Conditions, secretsstorev1.ConditionSecretsSynced)
	if synced.Reason != "ContentKept" || !strings.Contains(synced.Message, fmt.Sprintf("node %q", n1.name)) {
		t.Errorf("node 2's SecretsSynced condition: %s: %s; want ContentKept naming node 1", synced.Reason, synced.Message)
	}
	// Node 2 adds its pod as an owner, and nothing else.
	sec := n1.s.waitForSecret(t, ns, "fleet", syncedMeta("fleet", p1, p2), hasData(map[string][]byte{"token": newer}))
	if sec.Annotations["keymount.io/content-node"] != n1.name {
		t.Errorf("Secret fleet content node = %q, want %q", sec.Annotations["keymount.io/content-node"], n1.name)
	}
	n1.mustUnpublish(t, p1, "secrets")
	n2.mustUnpublish(t, p2, "secrets")
}
