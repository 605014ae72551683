package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// TestAPIWritesPerPublish counts, in the API server's audit log, every
// write request the driver makes (events included) in the life of a volume:
// its first publish makes one, the pod status's create, and one more per
// Secret its class syncs (the Secret's create); a republish that finds
// nothing new makes none; its unpublish makes one, the pod status's delete.
// The driver never deletes a synced Secret: the garbage collector does,
// once the Secret's owners are gone (TestPodDeletion).
//
// The tests run one at a time and each node's driver stops with its test,
// so every request of driverUser in this test is this node's driver's.
func TestAPIWritesPerPublish(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)

	t.Run("without secretObjects", func(t *testing.T) {
		content := []byte("plain-" + randomHex(8))
		n.writeObject(t, "plain", content)
		spc := n.createClass(t, ns, "plain", "local", []object{{name: "plain"}})
		pod := n.createPod(t, ns, "plain", secretsVolume{name: "secrets", class: "plain"})
		status := "secretproviderclasspodstatuses/" + statusName(pod, "plain")

		from, logFrom := n.s.auditMark(t), n.logMark(t)
		n.mustPublish(t, pod, "secrets")
		st := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"plain": content}})
		n.waitForStatusLogged(t, logFrom, pod, "plain", "pod status created", "pod status updated")
		n.checkWrites(t, "the first publish", from, "create "+status)

		n.republishUnchanged(t, pod, "secrets", st, nil)

		n.checkUnpublishWrites(t, pod, "secrets", "delete "+status)
	})

	t.Run("with secretObjects", func(t *testing.T) {
		content := []byte("synced-" + randomHex(8))
		n.writeObject(t, "synced", content)
		spc := n.createClass(t, ns, "synced", "local", []object{{name: "synced"}},
			&secretsstorev1.SecretObject{SecretName: "synced", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "synced", Key: "synced"}}})
		pod := n.createPod(t, ns, "synced", secretsVolume{name: "secrets", class: "synced"})
		status := "secretproviderclasspodstatuses/" + statusName(pod, "synced")

		from, logFrom := n.s.auditMark(t), n.logMark(t)
		n.mustPublish(t, pod, "secrets")
		// SecretsSynced True: the sync wrote the Secret without an error,
		// so the driver does not queue the volume again (a failed sync is
		// retried with backoff, which would write after the closing mark).
		st := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
			objects: map[string][]byte{"synced": content}})
		sec := n.s.waitForSecret(t, ns, "synced", syncedMeta("synced", pod), hasData(map[string][]byte{"synced": content}))
		n.waitForStatusLogged(t, logFrom, pod, "synced", "pod status created", "pod status updated")
		n.checkWrites(t, "the first publish", from, "create secrets/synced", "create "+status)

		n.republishUnchanged(t, pod, "secrets", st, sec)

		n.checkUnpublishWrites(t, pod, "secrets", "delete "+status)
		// The pod, the Secret's owner, still exists: the Secret stays as
		// it was.
		if got := n.s.secret(t, ns, "synced"); got == nil || got.ResourceVersion != sec.ResourceVersion {
			t.Errorf("Secret synced after the unpublish: resourceVersion %s, want %s (kept as it was)", rvOf(got), sec.ResourceVersion)
		}
	})
}

// checkUnpublishWrites unpublishes a volume, waits for the driver to have
// deleted its pod status (it deletes it after answering, and logs it once
// the API server has answered: the delete is its last request for the
// volume) and checks that the driver's writes were exactly want.
func (n *node) checkUnpublishWrites(t *testing.T, pod *corev1.Pod, volume string, want ...string) {
	t.Helper()
	class := csiSource(t, pod, volume).VolumeAttributes[attrClass]
	from, logFrom := n.s.auditMark(t), n.logMark(t)
	n.mustUnpublish(t, pod, volume)
	n.s.waitForStatusGone(t, pod, class, "the unpublish")
	n.waitForStatusLogged(t, logFrom, pod, class, "pod status deleted")
	n.checkWrites(t, "the unpublish", from, want...)
}

// checkWrites takes the closing audit mark and checks that the driver made
// exactly the writes want ("<verb> <resource>/<name>", "<verb> events" for
// an event, whose name is random) since the mark from, in any order. The
// caller has waited for proof that the driver is done with what it checks.
//
// The driver's writes are optimistic: a write from a cache that has not
// caught up with the driver's own last write is refused with a conflict
// (409) and changes nothing; the driver reads again and retries. Such a
// refusal is logged, not counted: want lists the writes the API server
// made, and that count is exact.
func (n *node) checkWrites(t *testing.T, what, from string, want ...string) {
	t.Helper()
	to := n.s.auditMark(t)
	var made, requests, refused []string
	for _, e := range n.s.writesBetween(t, driverUser, from, to) {
		code := e.ResponseStatus.Code
		switch {
		case code >= 200 && code < 300:
			made = append(made, writeName(e))
			requests = append(requests, describe(e))
		case code == http.StatusConflict:
			refused = append(refused, describe(e))
		default:
			t.Errorf("%s: a write of the driver failed: %s", what, describe(e))
		}
	}
	if len(refused) > 0 {
		t.Logf("%s: %d writes refused with a conflict (nothing changed): %q", what, len(refused), refused)
	}
	slices.Sort(made)
	want = slices.Sorted(slices.Values(want))
	if diff := cmp.Diff(want, made); diff != "" {
		t.Errorf("%s: the driver's writes to the API server (-want +got):\n%s\nthe requests, as the audit log shows them, in order:\n\t%s",
			what, diff, strings.Join(requests, "\n\t"))
	}
}

// writeName is a write request as checkWrites names it.
func writeName(e auditv1.Event) string {
	switch {
	case e.ObjectRef == nil:
		return e.Verb + " " + e.RequestURI
	case e.ObjectRef.Resource == "events":
		return e.Verb + " events"
	}
	return e.Verb + " " + e.ObjectRef.Resource + "/" + e.ObjectRef.Name
}

// writesBetween returns the write requests user sent between two audit
// marks (received after from, before to), each with its answer. The API
// server logs an answer a moment after sending it, maybe after the mark
// to: writesBetween waits for the answer of each request.
func (s *suite) writesBetween(t *testing.T, user, from, to string) []auditv1.Event {
	t.Helper()
	var writes []auditv1.Event
	err := poll.Check(t.Context(), reportTimeout, func(context.Context) error {
		events := s.env.AuditEvents(t)
		start, end := markIndex(events, from), markIndex(events, to)
		if start < 0 || end < 0 {
			return fmt.Errorf("audit marks %s (%d), %s (%d) not found among %d events", from, start, to, end, len(events))
		}
		received := map[types.UID]bool{}
		for _, e := range events[start:end] {
			if e.User.Username == user && e.Stage == auditv1.StageRequestReceived && isWrite(e) {
				received[e.AuditID] = true
			}
		}
		writes = writes[:0]
		for _, e := range requestsOf(events[start:], user) {
			if !received[e.AuditID] {
				continue
			}
			if e.ResponseStatus == nil {
				return fmt.Errorf("no answer logged yet to %s", describe(e))
			}
			writes = append(writes, e)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the writes of %s between audit marks %s and %s: %v", user, from, to, err)
	}
	return writes
}
