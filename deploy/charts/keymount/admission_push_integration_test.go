//go:build integration

package keymount_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// TestPushPathsPolicy applies the chart's push-paths policy to a real API
// server with keymount's CRDs: a PushSecret naming a class annotated
// keymount.io/push-paths is admitted with remote keys under its prefixes
// and refused (the message naming the class and its prefixes) with any
// other or with "..", on create and on update; a class without the
// annotation, or another annotated class of the namespace, restricts
// nothing.
func TestPushPathsPolicy(t *testing.T) {
	c := startPushPaths(t)
	ctx := t.Context()
	class := func(name string, paths *string) *secretsstorev1.SecretProviderClass {
		cl := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: secretsstorev1.SecretProviderClassSpec{Provider: "aws"}}
		if paths != nil {
			cl.Annotations = map[string]string{pushv1alpha1.AnnotationPushPaths: *paths}
		}
		return cl
	}
	bounded, other := "team-a/, secret/data/team-a/", "other/"
	for _, cl := range []*secretsstorev1.SecretProviderClass{class("bounded", &bounded), class("open", nil), class("elsewhere", &other)} {
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	push := func(name, className string, keys ...string) *pushv1alpha1.PushSecret {
		ps := &pushv1alpha1.PushSecret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: pushv1alpha1.PushSecretSpec{SecretProviderClassName: className,
				Selector: pushv1alpha1.PushSecretSelector{Secret: pushv1alpha1.PushSecretSecret{Name: "s"}}}}
		for _, k := range keys {
			ps.Spec.Data = append(ps.Spec.Data, pushv1alpha1.PushSecretData{Match: pushv1alpha1.PushSecretMatch{
				SecretKey: "k", RemoteRef: pushv1alpha1.PushSecretRemoteRef{RemoteKey: k}}})
		}
		return ps
	}
	// The binding's params are read from an informer: wait until the
	// policy refuses what it must before asserting what it admits.
	const refused = "must start with one of the prefixes SecretProviderClass bounded allows (keymount.io/push-paths: team-a/, secret/data/team-a/)"
	err := poll.Wait(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, push("probe", "bounded", "team-b/db"))
		if err == nil {
			_ = c.Delete(ctx, push("probe", "bounded"))
			return false, nil
		}
		return strings.Contains(err.Error(), refused), nil
	})
	if err != nil {
		t.Fatalf("the push-paths policy never came into force: %v", err)
	}
	for _, tc := range []struct {
		ps     *pushv1alpha1.PushSecret
		denied bool
	}{
		{push("ok", "bounded", "team-a/db", "secret/data/team-a/app"), false},
		{push("outside", "bounded", "team-a/db", "team-b/db"), true},
		{push("dotdot", "bounded", "team-a/../team-b/db"), true},
		{push("open", "open", "anything/at/all"), false},
		{push("no-class", "missing", "anything"), false},
	} {
		err := c.Create(ctx, tc.ps)
		switch {
		case tc.denied && (err == nil || !strings.Contains(err.Error(), refused)):
			t.Errorf("PushSecret %s: %v, want refused naming the class and its prefixes", tc.ps.Name, err)
		case !tc.denied && err != nil:
			t.Errorf("PushSecret %s: %v, want admitted", tc.ps.Name, err)
		}
	}
	ok := &pushv1alpha1.PushSecret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "ok"}, ok); err != nil {
		t.Fatal(err)
	}
	ok.Spec.Data[0].Match.RemoteRef.RemoteKey = "team-b/db"
	if err := c.Update(ctx, ok); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("an update to a key outside the prefixes: %v, want refused", err)
	}
}

// startPushPaths starts an API server with keymount's CRDs and the chart's
// push-paths policy type-checked, and the namespace team-a; it returns a
// client with keymount's types.
func startPushPaths(t *testing.T) client.Client {
	t.Helper()
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../crds"}, ControllerManager: true,
		Controllers: []string{"validatingadmissionpolicy-status-controller"}})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	out, err := renderRaw(loadChart(t), map[string]any{"controller": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, env)
	for _, doc := range releaseutil.SplitManifests(out["keymount/templates/admission-push.yaml"]) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := a.apply(ctx, u, "helm", false); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	poll.Until(t, "the push-paths policy type-checked", func(ctx context.Context) (bool, error) {
		p, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, releaseName+"-push-paths", metav1.GetOptions{})
		policy = p
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.TypeChecking != nil, err
	})
	for _, w := range policy.Status.TypeChecking.ExpressionWarnings {
		t.Errorf("policy %s: %s: %s", policy.Name, w.FieldRef, w.Warning)
	}

	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := pushv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}
