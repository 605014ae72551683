//go:build integration

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/fanout"
	"github.com/keymount/keymount/cluster/reflector"
	"github.com/keymount/keymount/cluster/syncrequest"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/k8senv"
)

// TestBinaryFanout runs keymount-controller with --enable-fanout against a
// real API server: a SecretSync whose secretObject.annotations carry
// reflector's annotations is a source — its Secret, filled from the local
// provider, is copied into the matching namespaces, one created later
// included, and not into the others; its next content reaches the copies.
func TestBinaryFanout(t *testing.T) {
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	createNamespaces(t, cs)
	for _, ns := range []string{"team-a", "other"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	store := t.TempDir()
	if err := os.WriteFile(filepath.Join(store, "token"), []byte("pull-v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir, err := sockettest.MkdirTemp("kmcf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	serveLocal(t, sockDir, store)
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + sockDir, "--enable-fanout", "--rotation-poll-interval=0s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, syncrequest.EnvPodNamespace+"=keymount-system", syncrequest.EnvPodName+"=keymount-controller-0")

	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "store"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "local", Parameters: map[string]string{"objects": "- objectName: token\n"}},
	}
	ss := &ss1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "pull", Annotations: map[string]string{"keymount.io/rotation-interval": "1s"}},
		Spec: ss1.SecretSyncSpec{SecretProviderClassName: "store", ServiceAccountName: "app", SecretObject: ss1.SecretObject{
			Type: "Opaque", Data: []ss1.SecretObjectData{{SourcePath: "token", TargetKey: "token"}},
			Annotations: map[string]string{
				reflector.AnnotationAllowed: "true", reflector.AnnotationAutoEnabled: "true",
				reflector.AnnotationAutoNamespaces: "team-.*",
			},
		}},
	}
	for _, o := range []client.Object{class, ss} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	copyIs := func(ns, want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "pull", metav1.GetOptions{})
			if err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return string(s.Data["token"]) == want && s.Labels[fanout.LabelCopy] == reflector.WriterName &&
				s.Annotations[reflector.AnnotationReflects] == "app/pull", nil
		}
	}
	poll(t, "the copy in team-a", copyIs("team-a", "pull-v1"))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the copy in team-b, created later", copyIs("team-b", "pull-v1"))
	if err := os.WriteFile(filepath.Join(store, "token"), []byte("pull-v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	poll(t, "the store's new value in team-a's copy", copyIs("team-a", "pull-v2"))
	poll(t, "the store's new value in team-b's copy", copyIs("team-b", "pull-v2"))
	if _, err := cs.CoreV1().Secrets("other").Get(ctx, "pull", metav1.GetOptions{}); err == nil {
		t.Error("a copy in namespace other, which the source does not match")
	}
}
