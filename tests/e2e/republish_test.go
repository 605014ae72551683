package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// TestRepublish changes an object in the store and republishes, as kubelet
// does about once a minute: the files, the pod status's object versions and
// the synced Secret follow. A republish that finds nothing new writes
// nothing to the API server.
func TestRepublish(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	v1 := []byte("first-" + randomHex(8))
	n.writeObject(t, "db/password", v1)
	spc := n.createClass(t, ns, "rotating", "local", []object{{name: "db/password", alias: "password"}},
		&secretsstorev1.SecretObject{SecretName: "rotating", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "rotating"})
	target := n.targetPath(pod, "secrets")
	n.mustPublish(t, pod, "secrets")
	st := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"db/password": v1}})
	sec := n.s.waitForSecret(t, ns, "rotating", syncedMeta("rotating", pod), hasData(map[string][]byte{"password": v1}))

	t.Run("unchanged", func(t *testing.T) {
		n.republishUnchanged(t, pod, "secrets", st, sec)
	})

	v2 := []byte("second-" + randomHex(8))
	n.writeObject(t, "db/password", v2)
	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, target, "password"); got != string(v2) {
		t.Errorf("password after the change = %q, want %q", got, v2)
	}
	st2 := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"db/password": v2}})
	if st2.ResourceVersion == st.ResourceVersion {
		t.Errorf("the pod status was not updated for the new version")
	}
	sec2 := n.s.waitForSecret(t, ns, "rotating", syncedMeta("rotating", pod), hasData(map[string][]byte{"password": v2}))
	n.s.waitForEvent(t, pod, corev1.EventTypeNormal, "SecretRefreshed", "rotating")

	t.Run("unchanged after a change", func(t *testing.T) {
		n.republishUnchanged(t, pod, "secrets", st2, sec2)
	})
	n.mustUnpublish(t, pod, "secrets")
}

// republishUnchanged republishes a volume whose objects did not change and
// checks that the pod status and the Secret (nil: the class syncs none)
// were not written: same resourceVersions, and no write request from the
// driver in the audit log. The driver writes after answering, so the check
// waits for the driver to log what it did with the pod status, which it
// writes last (after the Secrets): "pod status unchanged" is the expected
// answer, any other fails the test below.
//
// Right after a write the driver's cache may not have caught up, and its
// optimistic write is refused with a conflict (409) that changes nothing:
// a republish that made only such requests is tried once more, and that one
// must make none. A write that succeeded always fails the test.
func (n *node) republishUnchanged(t *testing.T, pod *corev1.Pod, volume string, st *secretsstorev1.SecretProviderClassPodStatus, sec *corev1.Secret) {
	t.Helper()
	class := st.Status.SecretProviderClassName
	for attempt := 1; ; attempt++ {
		from, logFrom := n.s.auditMark(t), n.logMark(t)
		n.mustPublish(t, pod, volume)
		n.waitForStatusLogged(t, logFrom, pod, class, "pod status unchanged", "pod status updated", "pod status created")
		to := n.s.auditMark(t)
		if got := n.s.podStatus(t, pod, class); got == nil || got.ResourceVersion != st.ResourceVersion {
			t.Errorf("pod status resourceVersion = %s, want %s (unchanged)", rvOf(got), st.ResourceVersion)
		}
		if sec != nil {
			if got := n.s.secret(t, sec.Namespace, sec.Name); got == nil || got.ResourceVersion != sec.ResourceVersion {
				t.Errorf("Secret %s resourceVersion = %s, want %s (unchanged)", sec.Name, rvOf(got), sec.ResourceVersion)
			}
		}
		var refused []string
		for _, e := range n.s.requestsBetween(t, driverUser, from, to) {
			if !isWrite(e) || e.ObjectRef == nil || e.ObjectRef.Resource == "events" {
				continue
			}
			if e.ResponseStatus == nil || e.ResponseStatus.Code != http.StatusConflict || attempt > 1 {
				t.Errorf("an unchanged republish made a write request: %s", describe(e))
				continue
			}
			refused = append(refused, describe(e))
		}
		if len(refused) == 0 {
			return
		}
		t.Logf("an unchanged republish right after a write met a stale cache (%v); republishing again", refused)
	}
}

// TestClassChanged edits the class of a mounted volume: one object is
// replaced by another, and so is one key of its synced Secret. Within a few
// republishes (the driver's cache follows the change) the volume holds
// exactly the new objects, the Secret exactly the new keys, and the pod
// status reports the new generation.
func TestClassChanged(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	objs := map[string][]byte{"a": []byte("a-" + randomHex(4)), "b": []byte("b-" + randomHex(4)), "c": []byte("c-" + randomHex(4))}
	for name, content := range objs {
		n.writeObject(t, name, content)
	}
	secretObject := func(keys ...string) *secretsstorev1.SecretObject {
		so := &secretsstorev1.SecretObject{SecretName: "evolving"}
		for _, k := range keys {
			so.Data = append(so.Data, &secretsstorev1.SecretObjectData{ObjectName: k, Key: "key-" + k})
		}
		return so
	}
	spc := n.createClass(t, ns, "evolving", "local", []object{{name: "a"}, {name: "b"}}, secretObject("a", "b"))
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "evolving"})
	target := n.targetPath(pod, "secrets")
	n.mustPublish(t, pod, "secrets")
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"a": objs["a"], "b": objs["b"]}})

	spc.Spec.Parameters["objects"] = objectsParameter(t, object{name: "a"}, object{name: "c"})
	spc.Spec.SecretObjects = []*secretsstorev1.SecretObject{secretObject("a", "c")}
	if err := n.s.ctrl.Update(t.Context(), spc); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a republish to pick up generation 2 of the class", func(context.Context) (bool, error) {
		if err := n.publish(t, pod, "secrets"); err != nil {
			return false, err
		}
		st := n.s.podStatus(t, pod, "evolving")
		return st != nil && st.Status.ObservedGeneration == spc.Generation, nil
	})
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"a": objs["a"], "c": objs["c"]}})
	if got := readFile(t, target, "c"); got != string(objs["c"]) {
		t.Errorf("c = %q, want %q", got, objs["c"])
	}
	if _, err := os.Stat(filepath.Join(target, "b")); !os.IsNotExist(err) {
		t.Errorf("b, no longer in the class, is still in the volume (%v)", err)
	}
	n.s.waitForSecret(t, ns, "evolving", syncedMeta("evolving", pod),
		hasData(map[string][]byte{"key-a": objs["a"], "key-c": objs["c"]}))
	n.mustUnpublish(t, pod, "secrets")
}

// TestRefreshFailure makes a republish fail in the provider (the object is
// gone from the store): kubelet deletes the mount directory of a volume
// whose republish fails, so the driver keeps the files, answers OK and
// records the failure in the pod status (Current False) and a Warning
// event. When the object is back, the next republish recovers.
func TestRefreshFailure(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	content := []byte("kept-" + randomHex(8))
	n.writeObject(t, "db/password", content)
	spc := n.createClass(t, ns, "fragile", "local", []object{{name: "db/password", alias: "password"}},
		&secretsstorev1.SecretObject{SecretName: "fragile", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "fragile"})
	target := n.targetPath(pod, "secrets")
	n.mustPublish(t, pod, "secrets")
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"db/password": content}})

	if err := os.Remove(filepath.Join(n.providerRoot, "db", "password")); err != nil {
		t.Fatal(err)
	}
	if err := n.publish(t, pod, "secrets"); err != nil {
		t.Fatalf("a republish whose refresh failed = %v, want OK (kubelet would delete the mount directory)", err)
	}
	if got := readFile(t, target, "password"); got != string(content) {
		t.Errorf("password after a failed refresh = %q, want the old %q", got, content)
	}
	// The failure shows in the pod status: Current False with the error,
	// Mounted still True (the old files are mounted).
	st := n.s.waitForStatus(t, pod, "fragile", func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		if c := condition(st, secretsstorev1.ConditionCurrent); c == nil || c.Status != metav1.ConditionFalse || c.Message == "" {
			return fmt.Errorf("condition Current after a failed refresh = %+v, want False with the error", c)
		}
		return nil
	}, conditionIs(secretsstorev1.ConditionMounted, metav1.ConditionTrue))
	wantObjects := []secretsstorev1.SecretProviderClassObject{{ID: "db/password", Version: version(content)}}
	if diff := cmp.Diff(wantObjects, st.Status.Objects); diff != "" {
		t.Errorf("pod status objects after a failed refresh (-want +got):\n%s", diff)
	}
	n.s.waitForEvent(t, pod, corev1.EventTypeWarning, "SecretRefreshFailed", "fragile")
	// The pod status is written after the sync: the Secret is final.
	if sec := n.s.secret(t, ns, "fragile"); sec == nil || string(sec.Data["password"]) != string(content) {
		t.Errorf("Secret fragile after a failed refresh (resourceVersion %s): want it kept with the old content", rvOf(sec))
	}

	n.writeObject(t, "db/password", content)
	n.mustPublish(t, pod, "secrets")
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"db/password": content}})
	n.mustUnpublish(t, pod, "secrets")
}

// TestClassDeletedWhileMounted deletes the class of a mounted volume: the
// pod keeps its files, the republish answers OK, and the failure shows in
// the pod status and a Warning event, as any failed refresh does.
func TestClassDeletedWhileMounted(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	content := []byte("orphaned-" + randomHex(8))
	n.writeObject(t, "token", content)
	spc := n.createClass(t, ns, "doomed", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "doomed", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "doomed"})
	n.mustPublish(t, pod, "secrets")
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"token": content}})

	if err := n.s.ctrl.Delete(t.Context(), spc); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the class to be gone", func(ctx context.Context) (bool, error) {
		err := n.s.ctrl.Get(ctx, clientKey(spc), &secretsstorev1.SecretProviderClass{})
		return err != nil, nil
	})
	if err := n.publish(t, pod, "secrets"); err != nil {
		t.Fatalf("a republish after the class was deleted = %v, want OK (kubelet would delete the mount directory)", err)
	}
	if got := readFile(t, n.targetPath(pod, "secrets"), "token"); got != string(content) {
		t.Errorf("token after the class was deleted = %q, want the old %q", got, content)
	}
	n.s.waitForEvent(t, pod, corev1.EventTypeWarning, "SecretRefreshFailed", "doomed")
	// Current False naming the class; Mounted still True: the old files
	// are mounted.
	st := n.s.waitForStatus(t, pod, "doomed", conditionIs(secretsstorev1.ConditionCurrent, metav1.ConditionFalse, "doomed"),
		conditionIs(secretsstorev1.ConditionMounted, metav1.ConditionTrue))
	wantObjects := []secretsstorev1.SecretProviderClassObject{{ID: "token", Version: version(content)}}
	if diff := cmp.Diff(wantObjects, st.Status.Objects); diff != "" {
		t.Errorf("pod status objects after the class was deleted (-want +got):\n%s", diff)
	}
	// The pod status is written after the sync: the Secret is final.
	if sec := n.s.secret(t, ns, "doomed"); sec == nil || string(sec.Data["token"]) != string(content) {
		t.Errorf("Secret doomed after the class was deleted (resourceVersion %s): want it kept with the mounted content", rvOf(sec))
	}
	n.mustUnpublish(t, pod, "secrets")
}

// condition returns a condition of a pod status, nil when it has none.
func condition(st *secretsstorev1.SecretProviderClassPodStatus, typ string) *metav1.Condition {
	for i := range st.Status.Conditions {
		if st.Status.Conditions[i].Type == typ {
			return &st.Status.Conditions[i]
		}
	}
	return nil
}
