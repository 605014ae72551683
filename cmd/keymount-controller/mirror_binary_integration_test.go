//go:build integration

package main

import (
	"context"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

var secretMirrors = schema.GroupVersionResource{Group: "mirrors.kts.studio", Version: "v1alpha2", Resource: "secretmirrors"}

// TestBinarySecretMirrors runs keymount-controller as a process with
// --enable-fanout against a real API server with keymount's CRDs: mirrors'
// README SecretMirror, applied unchanged, copies its Secret into the
// matching namespaces, a namespace created later gets its copy, the source's
// change reaches it, the status is Active, and deleting the SecretMirror
// removes the copies (mirrors' default deletePolicy) before it goes.
func TestBinarySecretMirrors(t *testing.T) {
	// The package's shared control plane (startSharedCluster): the test's namespaces have its run's
	// prefix, and it leaves only the source Secret, which no binary acts on.
	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: crds})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	run := rand.String(5) + "-"
	system, srcNS, demo1, demo2, unrelated := run+"keymount-system", run+"default-src", run+"demo-namespace-1", run+"demo-namespace-2", run+"unrelated"
	for _, ns := range []string{system, srcNS, demo1, unrelated} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "mysecret"},
		StringData: map[string]string{"username": "hellothere", "password": "generalkenobi"}}
	if _, err := cs.CoreV1().Secrets(srcNS).Create(ctx, src, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	proc := startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + t.TempDir(), "--enable-fanout",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, syncrequest.EnvPodNamespace+"="+system, syncrequest.EnvPodName+"=keymount-controller-0")

	// mirrors' README example, unchanged but for its namespace and the run's prefix of its destination.
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mirrors.kts.studio/v1alpha2", "kind": "SecretMirror",
		"metadata": map[string]any{"name": "mysecret", "namespace": srcNS},
		"spec": map[string]any{
			"source":      map[string]any{"name": "mysecret"},
			"destination": map[string]any{"namespaces": []any{"^" + run + `demo-namespace-\d+`}},
		},
	}}
	if _, err := dyn.Resource(secretMirrors).Namespace(srcNS).Create(ctx, m, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}
	copyHolds := func(ns, password string) {
		t.Helper()
		poll.Until(t, "the copy in "+ns, func(ctx context.Context) (bool, error) {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "mysecret", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && string(s.Data["password"]) == password && string(s.Data["username"]) == "hellothere", err
		})
	}
	copyHolds(demo1, "generalkenobi")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo2}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	copyHolds(demo2, "generalkenobi")
	poll.Until(t, "mirrorStatus Active", func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(secretMirrors).Namespace(srcNS).Get(ctx, "mysecret", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st, _, _ := unstructured.NestedString(got.Object, "status", "mirrorStatus")
		return st == "Active", nil
	})
	src.StringData = map[string]string{"username": "hellothere", "password": "you-were-the-chosen-one"}
	if _, err := cs.CoreV1().Secrets(srcNS).Update(ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	copyHolds(demo1, "you-were-the-chosen-one")
	copyHolds(demo2, "you-were-the-chosen-one")
	if _, err := cs.CoreV1().Secrets(unrelated).Get(ctx, "mysecret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s/mysecret: err %v, want not found", unrelated, err)
	}

	if err := dyn.Resource(secretMirrors).Namespace(srcNS).Delete(ctx, "mysecret", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the SecretMirror and its copies gone", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(secretMirrors).Namespace(srcNS).Get(ctx, "mysecret", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		for _, ns := range []string{demo1, demo2} {
			if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "mysecret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if _, err := cs.CoreV1().Secrets(srcNS).Get(ctx, "mysecret", metav1.GetOptions{}); err != nil {
		t.Errorf("the source: %v, want it kept", err)
	}
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0", err)
	}
}
