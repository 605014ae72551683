//go:build integration

package keymount_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// hashKeySecret is the Secret in which keymount-controller keeps its
// syncHash key (controller/synchash.KeySecretName): it creates it in its own
// namespace on first use.
const hashKeySecret = "keymount-controller-hash-key"

// access is one API access of keymount-controller's ServiceAccount.
type access struct {
	verb, group, resource, subresource, namespace string
}

// controllerAccess is what keymount-controller does (allowed) and a sample
// of what it must never do.
var controllerAccess = map[bool][]access{
	true: {
		{verb: "list", group: "secret-sync.x-k8s.io", resource: "secretsyncs"},
		{verb: "watch", group: "secret-sync.x-k8s.io", resource: "secretsyncs"},
		{verb: "patch", group: "secret-sync.x-k8s.io", resource: "secretsyncs", subresource: "status", namespace: "apps"},
		{verb: "update", group: "secret-sync.x-k8s.io", resource: "secretsyncs", subresource: "status", namespace: "apps"},
		{verb: "watch", group: "mirrors.kts.studio", resource: "secretmirrors"},
		{verb: "patch", group: "mirrors.kts.studio", resource: "secretmirrors", namespace: "apps"},
		{verb: "patch", group: "mirrors.kts.studio", resource: "secretmirrors", subresource: "status", namespace: "apps"},
		{verb: "update", group: "mirrors.kts.studio", resource: "secretmirrors", subresource: "finalizers", namespace: "apps"},
		{verb: "watch", group: "secrets-store.csi.x-k8s.io", resource: "secretproviderclasses"},
		{verb: "list", resource: "secrets"},
		{verb: "watch", resource: "secrets"},
		{verb: "patch", resource: "secrets", namespace: "apps"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "apps"},
		{verb: "create", resource: "events", namespace: "apps"},
		{verb: "create", group: "events.k8s.io", resource: "events", namespace: "apps"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
	},
	false: {
		{verb: "delete", resource: "secrets", namespace: "apps"},
		{verb: "deletecollection", resource: "secrets", namespace: "apps"},
		{verb: "update", group: "secret-sync.x-k8s.io", resource: "secretsyncs", namespace: "apps"},
		{verb: "delete", group: "secret-sync.x-k8s.io", resource: "secretsyncs", namespace: "apps"},
		{verb: "create", group: "mirrors.kts.studio", resource: "secretmirrors", namespace: "apps"},
		{verb: "delete", group: "mirrors.kts.studio", resource: "secretmirrors", namespace: "apps"},
		{verb: "create", group: "secrets-store.csi.x-k8s.io", resource: "secretproviderclasses", namespace: "apps"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "apps"},
		{verb: "get", resource: "configmaps", namespace: "apps"},
		{verb: "create", resource: "pods", namespace: "apps"},
		{verb: "patch", group: "apps", resource: "deployments", namespace: "apps"},
		{verb: "create", resource: "serviceaccounts", namespace: "apps"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	},
}

// TestControllerOnAPIServer installs everything the chart renders with
// controller.enabled on a real API server (not a dry run: the RBAC and the
// guard rails in force), then checks as keymount-controller's
// ServiceAccount: RBAC allows each access the controller makes and refuses
// the others (no delete of Secrets, no Lease outside the release
// namespace); real requests as the controller succeed (a Secret owned by
// the SecretSync of its name, its Lease, a token for the configured
// audience, its syncHash key Secret) or are refused (deleting a Secret).
func TestControllerOnAPIServer(t *testing.T) {
	// Own control plane: it installs the chart's RBAC and admission policies (fixed names) and asserts on them.
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"crds"}, ControllerManager: true,
		Controllers: []string{"validatingadmissionpolicy-status-controller"}})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespace(ctx, t, admin)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("apps").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, env)
	vals := map[string]any{"controller": map[string]any{"enabled": true,
		"tokenRequestAudiences": []any{map[string]any{"audience": policyAudience}}}}
	for _, obj := range renderValues(t, vals).objects {
		if err := a.apply(ctx, obj, "helm", false); err != nil {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	(&guardRails{admin: admin}).waitTypeChecked(t)
	for allowed, list := range controllerAccess {
		for _, acc := range list {
			if got := canI(ctx, t, admin, acc); got != allowed {
				t.Errorf("%s %s/%s/%s in %q: allowed %v, want %v", acc.verb, acc.group, acc.resource, acc.subresource, acc.namespace, got, allowed)
			}
		}
	}
	controller := impersonating(t, env, controllerUser)
	// The guard rails are in force once the API server's admission has
	// loaded them: a dry run of an ownerless Secret shows it.
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "apps"}, Type: corev1.SecretTypeOpaque}
	var last error
	err := poll.Wait(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		_, last = controller.CoreV1().Secrets("apps").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), deniedOwner), nil
	})
	if err != nil {
		t.Fatalf("the guard rails never denied the controller an ownerless Secret: %v (last answer: %v)", err, last)
	}
	checkControllerRequests(ctx, t, controller)
}

// canI asks the API server whether keymount-controller's ServiceAccount
// may make acc.
func canI(ctx context.Context, t *testing.T, admin kubernetes.Interface, acc access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   controllerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: acc.verb, Group: acc.group, Resource: acc.resource,
			Subresource: acc.subresource, Namespace: acc.namespace},
	}}
	got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// checkControllerRequests makes the controller's requests as it.
func checkControllerRequests(ctx context.Context, t *testing.T, controller kubernetes.Interface) {
	t.Helper()
	if err := createSecret("the Secret of SecretSync db", "db", corev1.SecretTypeOpaque, secretSyncOwner("db")).do(ctx, controller, "apps"); err != nil {
		t.Errorf("create the Secret of SecretSync db: %v", err)
	}
	if err := controller.CoreV1().Secrets("apps").Delete(ctx, "db", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot delete") {
		t.Errorf("delete a Secret: %v, want forbidden by RBAC", err)
	}
	seconds := int64(600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{policyAudience}, ExpirationSeconds: &seconds}}
	if _, err := controller.CoreV1().ServiceAccounts("apps").CreateToken(ctx, "app", tr, metav1.CreateOptions{}); err != nil {
		t.Errorf("token for the configured audience: %v", err)
	}
	lease := func(ns string) error {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "keymount-controller.secret-sync.x-k8s.io", Namespace: ns}}
		_, err := controller.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err := lease(namespace); err != nil {
		t.Errorf("create the Lease in %s: %v", namespace, err)
	}
	if err := lease("apps"); !apierrors.IsForbidden(err) {
		t.Errorf("create a Lease in apps: %v, want forbidden", err)
	}
	immutable := true
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: hashKeySecret, Namespace: namespace}, Type: corev1.SecretTypeOpaque,
		Immutable: &immutable, Data: map[string][]byte{"key": make([]byte, 32)}}
	if _, err := controller.CoreV1().Secrets(namespace).Create(ctx, key, metav1.CreateOptions{}); err != nil {
		t.Errorf("create the syncHash key Secret %s/%s as controller/synchash does: %v", namespace, hashKeySecret, err)
	}
	key.Namespace = "apps"
	if _, err := controller.CoreV1().Secrets("apps").Create(ctx, key, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a Secret named %s in apps, without owner: %v, want denied (only its own namespace's is exempt)", hashKeySecret, err)
	}
}

// TestControllerPodRestricted: keymount-controller's pod, with keymount's
// providers as sidecars (the local provider's files from a Secret), passes
// the Pod Security Standard "restricted" on a real API server (a
// server-side dry run in a namespace of its own enforcing it, on the shared
// control plane: the CRDs installed there change nothing for a pod).
func TestControllerPodRestricted(t *testing.T) {
	env := sharedWithCRDs(t)
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	ns, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := render(t, allFeatures).controller(t)
	if n := len(d.Spec.Template.Spec.Containers); n != 4 {
		t.Fatalf("%d containers, want the controller and its three providers (local, aws, vault)", n)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keymount-controller", Namespace: ns.Name}, Spec: d.Spec.Template.Spec}
	_, err = admin.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Errorf("the controller's pod in a restricted namespace: %v", err)
	}
	// The check can fail: a pod escalating privilege is refused there.
	bad := pod.DeepCopy()
	escalate := true
	bad.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &escalate
	if _, err := admin.CoreV1().Pods(ns.Name).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("a pod allowing privilege escalation in a restricted namespace: %v, want forbidden", err)
	}
}
