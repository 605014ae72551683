//go:build integration

package secretmirror_test

import (
	"context"
	"testing"

	"github.com/keymount/keymount/tests/poll"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/secretmirror"
)

// TestSecretMirrorNamespaceLifecycle runs kube-controller-manager's
// namespace controller, so namespaces are deleted as in a cluster: a
// destination namespace deleted takes its copy and the SecretMirror stays
// Active over the others, one re-created gets its copy again; the
// SecretMirror's own namespace deleted (the mirror with its finalizer, the
// source with it) removes every copy and the namespace finishes.
func TestSecretMirrorNamespaceLifecycle(t *testing.T) {
	f := startFixture(t)
	f.namespace(t, "mlife-src", "mlife-1", "mlife-2")
	f.source(t, "mlife-src", "pull", "v1")
	f.mirror(t, "mlife-src", "pull", "pull", mirrorsv1alpha2.DeletePolicyDelete, "^mlife-[0-9]$")
	f.copyHolds(t, "mlife-1", "pull", "v1")
	f.copyHolds(t, "mlife-2", "pull", "v1")

	f.deleteNamespace(t, "mlife-1")
	src, err := f.secret(t.Context(), "mlife-src", "pull")
	if err != nil || src == nil {
		t.Fatalf("the source: %v, %v", src, err)
	}
	src.Data = map[string][]byte{"k": []byte("v2")}
	if err := f.c.Update(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	f.copyHolds(t, "mlife-2", "pull", "v2")
	f.status(t, "mlife-src", "pull", mirrorsv1alpha2.MirrorStatusActive, "1 namespace")
	f.namespace(t, "mlife-1")
	f.copyHolds(t, "mlife-1", "pull", "v2")
	f.status(t, "mlife-src", "pull", mirrorsv1alpha2.MirrorStatusActive, "2 namespaces")
	f.noEvent(t, "mlife-src", secretmirror.EventMirrorError)

	f.deleteNamespace(t, "mlife-src")
	f.gone(t, "mlife-1", "pull")
	f.gone(t, "mlife-2", "pull")
}

// deleteNamespace deletes a namespace and waits until the namespace
// controller has removed it.
func (f *fixture) deleteNamespace(t *testing.T, name string) {
	t.Helper()
	if err := f.cs.CoreV1().Namespaces().Delete(t.Context(), f.ns(name), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "namespace "+name+" removed by the namespace controller", func(ctx context.Context) (bool, error) {
		_, err := f.cs.CoreV1().Namespaces().Get(ctx, f.ns(name), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// noEvent fails the test if any event in ns has reason.
func (f *fixture) noEvent(t *testing.T, ns, reason string) {
	t.Helper()
	l, err := f.cs.EventsV1().Events(f.ns(ns)).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Items {
		if e.Reason == reason {
			t.Errorf("event %s on %s/%s: %s", reason, ns, e.Regarding.Name, e.Note)
		}
	}
}
