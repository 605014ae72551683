//go:build integration

package keymount_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/releaseutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// TestSidecarIdentitiesOnAPIServer: the ServiceAccounts, token Secrets and
// RBAC the chart renders with every feature on, applied to a real API server
// whose kube-controller-manager runs the token controller, as a cluster's
// does. Each token Secret of the controller's AWS and Vault sidecars gets the
// keys the sidecar's volume requires (token, ca.crt, namespace); with them a
// client authenticates as the sidecar's own ServiceAccount, never the
// controller's, and may do what its provider does (prove a token with a
// TokenReview or the issuer's discovery; the AWS one also reads
// ServiceAccounts) and nothing of what the controller may (read Secrets,
// request tokens).
func TestSidecarIdentitiesOnAPIServer(t *testing.T) {
	// Own control plane: it applies the chart's ClusterRoles and bindings and asserts on them; the package's only one with the token controller.
	env := k8senv.Start(t, k8senv.Options{ServiceAccountTokenSecrets: true})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespace(ctx, t, admin)
	a := newApplier(t, env)
	// In Helm's install order (ServiceAccounts before Secrets, as kustomize
	// and kubectl apply them too): the token controller deletes a token
	// Secret whose ServiceAccount does not exist yet.
	var objs []*unstructured.Unstructured
	for _, obj := range render(t, allFeatures).objects {
		if slices.Contains([]string{"ServiceAccount", "Secret", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}, obj.GetKind()) {
			objs = append(objs, obj)
		}
	}
	slices.SortStableFunc(objs, func(x, y *unstructured.Unstructured) int {
		return slices.Index(releaseutil.InstallOrder, x.GetKind()) - slices.Index(releaseutil.InstallOrder, y.GetKind())
	})
	for _, obj := range objs {
		if err := a.apply(ctx, obj, "helm", false); err != nil {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, p := range []string{"aws", "vault"} {
		t.Run(p, func(t *testing.T) {
			sa := controllerName + "-provider-" + p
			sidecar := sidecarClient(ctx, t, env, admin, sa)
			who, err := sidecar.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("who am I: %v", err)
			}
			if want := "system:serviceaccount:" + namespace + ":" + sa; who.Status.UserInfo.Username != want {
				t.Errorf("the sidecar's token authenticates as %q, want %q", who.Status.UserInfo.Username, want)
			}
			checkSidecarMayProve(ctx, t, sidecar, admin)
			_, err = sidecar.CoreV1().ServiceAccounts(namespace).Get(ctx, controllerName, metav1.GetOptions{})
			if readsAccounts := err == nil; readsAccounts != (p == "aws") || err != nil && !apierrors.IsForbidden(err) {
				t.Errorf("get a ServiceAccount: %v, want allowed for the AWS provider alone", err)
			}
			if _, err := sidecar.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("list Secrets: %v, want forbidden", err)
			}
			if _, err := sidecar.CoreV1().Secrets(namespace).Get(ctx, sa+"-token", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("get its own token Secret: %v, want forbidden", err)
			}
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}}}
			if _, err := sidecar.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, controllerName, tr, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("request a token of the controller's ServiceAccount: %v, want forbidden", err)
			}
		})
	}
}

// sidecarClient waits for kube-controller-manager to fill in the token
// Secret of the ServiceAccount sa, as the sidecar's volume reads it, and
// returns a client configured from its keys alone, as client-go's in-cluster
// configuration is.
func sidecarClient(ctx context.Context, t *testing.T, env *k8senv.Env, admin kubernetes.Interface, sa string) kubernetes.Interface {
	t.Helper()
	var sec *corev1.Secret
	err := poll.Wait(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		sec, err = admin.CoreV1().Secrets(namespace).Get(ctx, sa+"-token", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(sec.Data["token"]) > 0 && len(sec.Data["ca.crt"]) > 0 && len(sec.Data["namespace"]) > 0, nil
	})
	if err != nil {
		t.Fatalf("the token Secret %s-token never got token, ca.crt and namespace: %v", sa, err)
	}
	if string(sec.Data["namespace"]) != namespace {
		t.Errorf("namespace %q, want %s", sec.Data["namespace"], namespace)
	}
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: string(sec.Data["token"]),
		TLSClientConfig: rest.TLSClientConfig{CAData: sec.Data["ca.crt"]}}
	return kubernetes.NewForConfigOrDie(cfg)
}

// checkSidecarMayProve: the sidecar reads the service account issuer's
// discovery document and keys, and creates a TokenReview that proves a
// workload's token (one the administrator requests, as the controller
// would).
func checkSidecarMayProve(ctx context.Context, t *testing.T, sidecar, admin kubernetes.Interface) {
	t.Helper()
	for _, path := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
		if _, err := sidecar.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx); err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}}}
	tok, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, controllerName, tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok.Status.Token, Audiences: []string{"vault"}}}
	got, err := sidecar.AuthenticationV1().TokenReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil || !got.Status.Authenticated {
		t.Errorf("TokenReview of a workload's token: %v, status %+v", err, got)
	}
}
