package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
)

// TestClassMissing publishes a volume whose class does not exist:
// FailedPrecondition naming the class, a Warning event on the pod, nothing
// mounted and no pod status. Once the class exists, kubelet's retry mounts.
func TestClassMissing(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	pod := n.createPod(t, ns, "early-bird", secretsVolume{name: "secrets", class: "not-yet"})

	from := n.s.auditMark(t)
	err := n.publish(t, pod, "secrets")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "not-yet") {
		t.Errorf("NodePublishVolume with a missing class = %v, want FailedPrecondition naming the class not-yet", err)
	}
	n.checkNothingMounted(t, pod, "secrets")
	n.s.waitForEvent(t, pod, corev1.EventTypeWarning, "SecretMountFailed", "not-yet")
	if st := n.s.podStatus(t, pod, "not-yet"); st != nil {
		t.Errorf("a failed first publish created pod status %s", st.Name)
	}

	content := []byte("late-" + randomHex(4))
	n.writeObject(t, "late", content)
	spc := n.createClass(t, ns, "not-yet", "local", []object{{name: "late"}})
	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, n.targetPath(pod, "secrets"), "late"); got != string(content) {
		t.Errorf("late = %q, want %q", got, content)
	}
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"late": content}})
	// The driver writes pod statuses after answering, so the check above
	// could have come before a late write for the failed publish. The
	// audit log settles it: had the failed publish written a status, the
	// driver would have written it twice (created, then updated for the
	// success). It wrote it once: the success's create.
	to := n.s.auditMark(t)
	var writes []string
	for _, e := range n.s.requestsBetween(t, driverUser, from, to) {
		if isWrite(e) && aboutStatus(pod, "not-yet")(e) {
			writes = append(writes, describe(e))
		}
	}
	if len(writes) != 1 || !strings.HasPrefix(writes[0], "create ") || !strings.HasSuffix(writes[0], fmt.Sprintf(" -> %d", http.StatusCreated)) {
		t.Errorf("the driver's writes of the pod status = %q, want one create (of the successful publish)", writes)
	}
	n.mustUnpublish(t, pod, "secrets")
}

// TestProviderMissing publishes a volume whose class names a provider
// without a socket: FailedPrecondition naming the provider and every
// directory searched, a Warning event, nothing mounted.
func TestProviderMissing(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	n.createClass(t, ns, "elsewhere", "nope", []object{{name: "anything"}})
	pod := n.createPod(t, ns, "stranded", secretsVolume{name: "secrets", class: "elsewhere"})

	err := n.publish(t, pod, "secrets")
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("NodePublishVolume with a missing provider = %v, want FailedPrecondition", err)
	}
	for _, want := range []string{"nope", n.providerDir, n.extraProviderDir} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not name %s", msg, want)
		}
	}
	n.checkNothingMounted(t, pod, "secrets")
	n.s.waitForEvent(t, pod, corev1.EventTypeWarning, "SecretMountFailed", "nope")
	if st := n.s.podStatus(t, pod, "elsewhere"); st != nil {
		t.Errorf("a failed first publish created pod status %s", st.Name)
	}
}

// checkNothingMounted checks that a failed first publish left no target and
// no mount behind.
func (n *node) checkNothingMounted(t *testing.T, pod *corev1.Pod, volume string) {
	t.Helper()
	if _, err := os.Lstat(n.targetPath(pod, volume)); !os.IsNotExist(err) {
		t.Errorf("a failed first publish left the target behind (%v)", err)
	}
	if ms := mountsUnder(t, n.dir); len(ms) > 0 {
		t.Errorf("a failed first publish left mounts: %v", ms)
	}
}
