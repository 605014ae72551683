//go:build integration

package reflector_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// TestNamespaceLifecycle runs kube-controller-manager's namespace
// controller, so namespaces are deleted as in a cluster (their contents
// first, then the namespace): a matching namespace deleted takes its copy
// with it and the other copies stay in step, one re-created gets its copy
// again, one relabelled away loses it, and the source's own namespace
// deleted takes every copy with the source; no copy write fails meanwhile.
func TestNamespaceLifecycle(t *testing.T) {
	f := startFixtureWith(t, k8senv.Options{ControllerManager: true, Controllers: []string{"namespace-controller"}})
	f.namespace(t, "life-src", nil)
	f.namespace(t, "life-1", map[string]string{"tier": "dev"})
	f.namespace(t, "life-2", map[string]string{"tier": "dev"})
	f.source(t, "life-src", "tls", map[string]string{"k": "v1"}, auto("life-.*", "life-.*"))
	sel := auto("", "")
	sel[reflector.AnnotationAllowedNamespacesSelector] = "tier=dev"
	sel[reflector.AnnotationAutoNamespacesSelector] = "tier=dev"
	f.source(t, "life-src", "by-label", map[string]string{"k": "dev"}, sel)
	for _, ns := range []string{"life-1", "life-2"} {
		f.waitFor(t, ns, "tls", ctrltest.HasData(map[string]string{"k": "v1"}))
		f.waitFor(t, ns, "by-label", ctrltest.HasData(map[string]string{"k": "dev"}))
	}

	// A matching namespace deleted: it goes, copies and all; the source
	// still reaches the other one.
	f.deleteNamespace(t, "life-1")
	f.update(t, "life-src", "tls", func(s *corev1.Secret) { s.StringData = map[string]string{"k": "v2"} })
	f.waitFor(t, "life-2", "tls", ctrltest.HasData(map[string]string{"k": "v2"}))
	// Re-created, it gets its copy again.
	f.namespace(t, "life-1", nil)
	f.waitFor(t, "life-1", "tls", ctrltest.HasData(map[string]string{"k": "v2"}))
	f.waitFor(t, "life-1", "by-label", absent)

	// Relabelled to no longer match the selector: that copy goes, the
	// name-matched one stays.
	f.relabel(t, "life-2", map[string]string{"tier": "prod"})
	f.waitFor(t, "life-2", "by-label", absent)
	f.waitFor(t, "life-2", "tls", ctrltest.HasData(map[string]string{"k": "v2"}))
	f.noEvent(t, "life-src", fanout.ReasonCopyFailed)

	// The source's namespace deleted: the source goes with it, and so do
	// its copies.
	f.deleteNamespace(t, "life-src")
	for _, ns := range []string{"life-1", "life-2"} {
		f.waitFor(t, ns, "tls", absent)
	}
}

// deleteNamespace deletes a namespace and waits until the namespace
// controller has removed it.
func (f *fixture) deleteNamespace(t *testing.T, name string) {
	t.Helper()
	if err := f.cs.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := poll.Wait(t.Context(), 2*eventually, func(ctx context.Context) (bool, error) {
		_, err := f.cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("namespace %s not removed by the namespace controller: %v", name, err)
	}
}

// noEvent fails the test if any event in ns has reason.
func (f *fixture) noEvent(t *testing.T, ns, reason string) {
	t.Helper()
	l, err := f.cs.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Items {
		if e.Reason == reason {
			t.Errorf("event %s on %s/%s: %s", reason, ns, e.Regarding.Name, e.Note)
		}
	}
}
