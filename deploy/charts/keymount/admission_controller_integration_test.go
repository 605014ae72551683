//go:build integration

package keymount_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// The controller's user as the chart names it, and another service
// account of the same namespace with the same RBAC rules.
const (
	controllerUser = "system:serviceaccount:" + namespace + ":" + releaseName + "-controller"
	otherUser      = "system:serviceaccount:" + namespace + ":someone-else"
	// policyAudience is the audience the test's release configures.
	policyAudience = "vault"
)

// guardRails is the control plane with the chart's controller policies in
// force, a namespace for the Secrets, and clients as the controller, as
// another service account and as an administrator.
type guardRails struct {
	admin, controller, other kubernetes.Interface
	ns                       string
}

// impersonating returns a client of env's administrator impersonating the
// service account user.
func impersonating(t *testing.T, env *k8senv.Env, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	return kubernetes.NewForConfigOrDie(cfg)
}

// controllerPolicies renders the chart's controller admission policies and
// bindings with vals.
func controllerPolicies(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	out, err := renderRaw(loadChart(t), vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(out["keymount/templates/admission-controller.yaml"]) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	if len(objs) != 2*len(controllerRails) {
		t.Fatalf("the chart renders %d controller admission objects, want %d policies and as many bindings", len(objs), len(controllerRails))
	}
	return objs
}

// startGuardRails starts an API server, grants both service accounts every
// verb on Secrets and TokenRequests (RBAC is not what is tested), applies
// the policies and bindings objs and waits until the API server has
// type-checked every one of them.
func startGuardRails(t *testing.T, objs []*unstructured.Unstructured) *guardRails {
	t.Helper()
	return startGuardRailsWith(t, objs, nil)
}

// startGuardRailsWith is startGuardRails that hands the environment to
// started (when set) before it returns.
func startGuardRailsWith(t *testing.T, objs []*unstructured.Unstructured, started func(*k8senv.Env)) *guardRails {
	t.Helper()
	// kube-controller-manager's status controller type-checks the policies.
	// Own control plane: each test applies the chart's admission policies and ClusterRoles (fixed names) rendered from values of its own, and asserts on them.
	env := k8senv.Start(t, k8senv.Options{ControllerManager: true, Controllers: []string{"validatingadmissionpolicy-status-controller"}})
	if started != nil {
		started(env)
	}
	ctx := t.Context()
	g := &guardRails{admin: kubernetes.NewForConfigOrDie(env.Config),
		controller: impersonating(t, env, controllerUser), other: impersonating(t, env, otherUser)}
	ensureNamespace(ctx, t, g.admin)
	ns, err := g.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apps-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g.ns = ns.Name
	if _, err := g.admin.CoreV1().ServiceAccounts(g.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-secret-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
	}}
	if _, err := g.admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-secret-writer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: controllerUser},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: otherUser},
		}}
	if _, err := g.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, env)
	for _, obj := range objs {
		if err := a.apply(ctx, obj, "helm", false); err != nil {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	g.waitTypeChecked(t)
	return g
}

// waitTypeChecked waits until the API server has type-checked every
// policy applied, the controller's rails all there (beside the chart's
// others, such as push-paths), and fails on any warning (a misspelt field, an
// expression of the wrong type).
func (g *guardRails) waitTypeChecked(t *testing.T) {
	t.Helper()
	policies := g.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	var list *admissionregistrationv1.ValidatingAdmissionPolicyList
	err := poll.Wait(t.Context(), 60*time.Second, func(ctx context.Context) (bool, error) {
		l, err := policies.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		list = l
		rails := 0
		for _, p := range list.Items {
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return false, nil
			}
			if strings.Contains(p.Name, "-controller-") {
				rails++
			}
		}
		return rails == len(controllerRails), nil
	})
	if err != nil {
		t.Fatalf("the API server never type-checked the %d policies: %v (%+v)", len(controllerRails), err, list)
	}
	for _, p := range list.Items {
		for _, w := range p.Status.TypeChecking.ExpressionWarnings {
			t.Errorf("policy %s: %s: %s", p.Name, w.FieldRef, w.Warning)
		}
	}
}

// request is one write as a user; it returns the API server's answer.
type request struct {
	name string
	do   func(ctx context.Context, c kubernetes.Interface, ns string) error
}

// ownerRef is an owner reference to the SecretSync name (or of another
// kind and apiVersion).
func ownerRef(apiVersion, kind, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("0a3c8d8e-" + name)}
}

func secretSyncOwner(name string) metav1.OwnerReference {
	return ownerRef("secret-sync.x-k8s.io/v1alpha1", "SecretSync", name)
}

// createSecret is a request that creates Secret name of typ with owners.
func createSecret(what, name string, typ corev1.SecretType, owners ...metav1.OwnerReference) request {
	return request{name: what, do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners,
			Labels: map[string]string{"secrets-store.sync.x-k8s.io": ""}},
			Type: typ, StringData: map[string]string{"key": "value"}}
		if typ == corev1.SecretTypeTLS {
			s.StringData[corev1.TLSCertKey], s.StringData[corev1.TLSPrivateKeyKey] = "cert", "key"
		}
		if typ == corev1.SecretTypeServiceAccountToken {
			s.Annotations = map[string]string{corev1.ServiceAccountNameKey: "app"}
		}
		_, err := c.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: "keymount-test"})
		return err
	}}
}

// copyLabel marks keymount's copies (controller/fanout.LabelCopy).
const copyLabel = "fanout.keymount.io/copy"

// createCopy is a request that creates Secret name as a fan-out copy (the
// label), with owners.
func createCopy(what, name string, owners ...metav1.OwnerReference) request {
	return request{name: what, do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners,
			Labels: map[string]string{copyLabel: "reflector"}}, StringData: map[string]string{"key": "value"}}
		_, err := c.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: "keymount-controller"})
		return err
	}}
}

// configMap is a request that creates ConfigMap name with labels.
func configMap(what, name string, labels map[string]string) request {
	return request{name: what, do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: map[string]string{"k": "v"}}
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: "keymount-controller"})
		return err
	}}
}

// deleteObject is a request that deletes the Secret or ConfigMap name.
func deleteObject(what, resource, name string) request {
	return request{name: what, do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
		if resource == "configmaps" {
			return c.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
		return c.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}}
}

// patchSecret is a request that merge-patches Secret name.
func patchSecret(what, name, patch string) request {
	return request{name: what, do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
		_, err := c.CoreV1().Secrets(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "keymount-test"})
		return err
	}}
}

// tokenRequest is a request for a token of ServiceAccount app.
func tokenRequest(what string, seconds *int64, audiences ...string) request {
	return request{name: what, do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: seconds}}
		_, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "app", tr, metav1.CreateOptions{})
		return err
	}}
}

// wantDenied fails unless err is the policies' denial naming want.
func wantDenied(t *testing.T, who string, r request, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %s: %v, want denied by the policy (%q)", who, r.name, err, want)
	}
}

// namespace creates a namespace with ServiceAccount app, the Secret db as
// the controller leaves it (owned by the SecretSync db) and the Secret
// theirs that someone else created (no owner).
func (g *guardRails) namespace(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	ns, err := g.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apps-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.admin.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []request{createSecret("db", "db", corev1.SecretTypeOpaque, secretSyncOwner("db")), createSecret("theirs", "theirs", corev1.SecretTypeOpaque),
		configMap("theirs-cm", "theirs-cm", nil)} {
		if err := r.do(ctx, g.admin, ns.Name); err != nil {
			t.Fatalf("create %s: %v", r.name, err)
		}
	}
	// A manual mirror as reflector's users write it.
	mirror := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mirror", Namespace: ns.Name,
		Annotations: map[string]string{"reflector.v1.k8s.emberstack.com/reflects": "src/db"}}}
	if _, err := g.admin.CoreV1().Secrets(ns.Name).Create(ctx, mirror, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A copy ktsstudio/mirrors wrote for its SecretMirror src/db.
	byMirrors := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "by-mirrors", Namespace: ns.Name,
		Annotations: map[string]string{"mirrors.kts.studio/owned-by": "src/db"}}}
	if _, err := g.admin.CoreV1().Secrets(ns.Name).Create(ctx, byMirrors, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// A denied request and the words of the denial.
type denial struct {
	r    request
	want string
}

// Words of each rail's denial.
const (
	deniedType     = "keymount-controller may not write a Secret of type"
	deniedSAToken  = "keymount-controller may never write a Secret of type kubernetes.io/service-account-token"
	deniedOwner    = "only with exactly one owner reference, to the SecretSync"
	deniedTakeover = "it is not owned by the SecretSync of the same name alone"
	deniedDelete   = "keymount-controller never deletes Secrets"
	deniedOrphan   = "creation policy Orphan needs variable orphanAllowed of this policy: chart value controller.secretPolicies.orphan"
	deniedDeleteOn = "keymount-controller deletes only the copies it wrote (label fanout.keymount.io/copy) and the Secrets a SecretSync of the same name created"
	deniedMerge    = "creation policy Merge needs variable mergeAllowed of this policy: chart value controller.secretPolicies.merge"
	deniedAud      = "only for one of the audiences it is configured with"
	deniedTTL      = "only with expirationSeconds 600"
	deniedCopyOwn  = "as a copy (label fanout.keymount.io/copy) with an owner reference"
	deniedCopyOf   = "a copy: it did not write it"
	deniedCM       = "keymount-controller writes and deletes only the ConfigMaps it copies"
)

// deniedRequests are the requests a guard rail refuses the controller, in
// an order that keeps the Secrets they name (deletes last).
func deniedRequests() []denial {
	ttl := func(s int64) *int64 { return &s }
	ownerJSON := `{"apiVersion":"secret-sync.x-k8s.io/v1alpha1","kind":"SecretSync","name":"%s","uid":"0a3c8d8e-%s"}`
	owner := func(name string) string { return strings.ReplaceAll(ownerJSON, "%s", name) }
	return []denial{
		{createSecret("a Secret of a type not allowed", "odd", "example.com/custom", secretSyncOwner("odd")), deniedType},
		{createSecret("a Secret without owner", "plain", corev1.SecretTypeOpaque), deniedOwner},
		{createSecret("a Secret with a second owner", "two", corev1.SecretTypeOpaque, secretSyncOwner("two"), ownerRef("v1", "ConfigMap", "two")), deniedOwner},
		{createSecret("a Secret owned by the SecretSync of another name", "mine", corev1.SecretTypeOpaque, secretSyncOwner("yours")), deniedOwner},
		{createSecret("a Secret owned by a SecretSync of another version", "v2", corev1.SecretTypeOpaque, ownerRef("secret-sync.x-k8s.io/v1beta1", "SecretSync", "v2")), deniedOwner},
		{createSecret("a Secret owned by another kind of the name", "app", corev1.SecretTypeOpaque, ownerRef("apps/v1", "Deployment", "app")), deniedOwner},
		{createSecret("its hash key's name outside its own namespace", "keymount-controller-hash-key", corev1.SecretTypeOpaque), deniedOwner},
		{patchSecret("removing the owner of its Secret", "db", `{"metadata":{"ownerReferences":null}}`), deniedOwner},
		{patchSecret("adding a second owner to its Secret", "db", `{"metadata":{"ownerReferences":[`+owner("db")+`,`+owner("other")+`]}}`), deniedOwner},
		{patchSecret("taking over someone else's Secret", "theirs", `{"metadata":{"ownerReferences":[`+owner("theirs")+`]}}`), deniedTakeover},
		{patchSecret("writing into someone else's Secret (creation policy Merge, not switched on)", "theirs", `{"stringData":{"key":"new"}}`), deniedMerge},
		{request{name: "an ownerless Secret with keymount.io/secret-sync-uid (creation policy Orphan, not switched on)", do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Annotations: map[string]string{"keymount.io/secret-sync-uid": "0a3c8d8e-orphan"}}}
			_, err := c.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		}}, deniedOrphan},
		{patchSecret("making someone else's Secret a copy", "theirs", `{"metadata":{"labels":{"`+copyLabel+`":"reflector"}}}`), deniedCopyOf},
		{createCopy("a copy with an owner", "owned-copy", secretSyncOwner("owned-copy")), deniedCopyOwn},
		{configMap("a ConfigMap that is no copy", "plain-cm", nil), deniedCM},
		{request{name: "labelling someone else's ConfigMap a copy", do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
			_, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "theirs-cm", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+copyLabel+`":"reflector"}}}`), metav1.PatchOptions{})
			return err
		}}, deniedCopyOf},
		{tokenRequest("a token for another audience", ttl(600), "other"), deniedAud},
		{tokenRequest("a token for two audiences", ttl(600), policyAudience, "other"), deniedAud},
		{tokenRequest("a token for an hour", ttl(3600), policyAudience), deniedTTL},
		{tokenRequest("a token of the default lifetime", nil, policyAudience), deniedTTL},
		{deleteObject("deleting someone else's ConfigMap", "configmaps", "theirs-cm"), deniedCM},
		{request{name: "deleting its Secret", do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
			return c.CoreV1().Secrets(ns).Delete(ctx, "db", metav1.DeleteOptions{})
		}}, deniedDelete},
		{request{name: "deleting every Secret", do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
			return c.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}}, deniedDelete},
	}
}

// TestControllerAdmissionPolicies: with the chart's controller policies as
// rendered (controller.enabled, one token audience), on a real API server,
// the controller's ServiceAccount creates, updates and applies the Secrets
// of its SecretSyncs and requests a token as keymount-controller does,
// while each guard rail refuses it what it guards (a type not allowed, a
// service account token, any owner but the SecretSync of the same name,
// another's Secret, deletes, other audiences or lifetimes); another service
// account with the same RBAC rules is refused none of it.
func TestControllerAdmissionPolicies(t *testing.T) {
	vals := map[string]any{"controller": map[string]any{"enabled": true,
		"tokenRequestAudiences": []any{map[string]any{"audience": policyAudience}}}}
	g := startGuardRails(t, controllerPolicies(t, vals))
	ctx := t.Context()
	ns := g.namespace(t)
	g.waitInForce(t, ns)
	t.Run("the controller's own writes are admitted", func(t *testing.T) { testControllerAdmitted(t, g, ns) })
	t.Run("each guard rail refuses the controller", func(t *testing.T) {
		for _, d := range deniedRequests() {
			wantDenied(t, "the controller", d.r, d.r.do(ctx, g.controller, ns), d.want)
		}
		s, err := g.admin.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Name != "db" {
			t.Errorf("Secret db after the denials: %v, %v; want it kept with its one owner", s, err)
		}
		if s, err := g.admin.CoreV1().Secrets(ns).Get(ctx, "theirs", metav1.GetOptions{}); err != nil || len(s.OwnerReferences) != 0 || string(s.Data["key"]) != "value" {
			t.Errorf("Secret theirs after the denials: %v, %v; want it unchanged", s, err)
		}
	})
	t.Run("adopting a Secret handed over", func(t *testing.T) { testAdoption(t, g, ns) })
	t.Run("a service account token Secret", func(t *testing.T) { testNoSATokens(t, g, ns) })
	t.Run("other users are not bound", func(t *testing.T) {
		other := g.namespace(t)
		for _, d := range deniedRequests() {
			if err := d.r.do(ctx, g.other, other); err != nil {
				t.Errorf("another service account: %s: %v, want admitted", d.r.name, err)
			}
		}
		sa := createSecret("a service account token Secret", "sa", corev1.SecretTypeServiceAccountToken)
		if err := sa.do(ctx, g.other, other); err != nil {
			t.Errorf("another service account: %s: %v, want admitted", sa.name, err)
		}
	})
	// Last: it switches the rails' variables for the rest of the run.
	t.Run("controller.secretPolicies switched on", func(t *testing.T) { testSecretPoliciesOn(t, g) })
}

// setVariable sets the variable of the controller's policy rail (its name
// after <fullname>-controller-) to expression, as the kustomize component
// documents it.
func (g *guardRails) setVariable(t *testing.T, rail, variable, expression string) {
	t.Helper()
	policies := g.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	name := releaseName + "-controller-" + rail
	p, err := policies.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range p.Spec.Variables {
		if v.Name == variable {
			patch := `[{"op":"replace","path":"/spec/variables/` + strconv.Itoa(i) + `/expression","value":"` + expression + `"}]`
			if _, err := policies.Patch(t.Context(), name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("policy %s has no variable %s", name, variable)
}

// testSecretPoliciesOn: with orphanAllowed, mergeAllowed and deleteAllowed
// "true" (the chart's controller.secretPolicies), the rails admit what
// External Secrets' Orphan, Merge and Delete need, and still refuse taking
// over another's Secret (an owner reference or the Orphan annotation
// added), removing another's owner reference, an ownerless Secret without
// the annotation, and deleting any Secret no SecretSync created.
func testSecretPoliciesOn(t *testing.T, g *guardRails) {
	ctx := t.Context()
	ns := g.namespace(t)
	// Owned by an object that exists (the garbage collector runs here).
	sa, err := g.admin.CoreV1().ServiceAccounts(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	foreign := createSecret("foreign", "foreign", corev1.SecretTypeOpaque, metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID})
	if err := foreign.do(ctx, g.admin, ns); err != nil {
		t.Fatal(err)
	}
	g.setVariable(t, "secret-owner", "orphanAllowed", "true")
	g.setVariable(t, "secret-owner", "mergeAllowed", "true")
	g.setVariable(t, "no-secret-deletes", "deleteAllowed", "true")
	dry := []string{metav1.DryRunAll}
	var last error
	err = poll.Wait(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		_, merge := g.controller.CoreV1().Secrets(ns).Patch(ctx, "theirs", types.MergePatchType, []byte(`{"stringData":{"k":"v"}}`), metav1.PatchOptions{DryRun: dry})
		orphan := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Annotations: map[string]string{"keymount.io/secret-sync-uid": "u"}}}
		_, create := g.controller.CoreV1().Secrets(ns).Create(ctx, orphan, metav1.CreateOptions{DryRun: dry})
		del := g.controller.CoreV1().Secrets(ns).Delete(ctx, "db", metav1.DeleteOptions{DryRun: dry})
		last = errors.Join(merge, create, del)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the switched-on rails never admitted a merge, an orphan and a delete: %v (last answer: %v)", err, last)
	}
	orphaned := func(what, name string) request {
		return request{name: what, do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"keymount.io/secret-sync-uid": "0a3c8d8e-" + name}},
				StringData: map[string]string{"key": "value"}}
			_, err := c.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		}}
	}
	for _, r := range []request{
		orphaned("creating an Orphan Secret", "orphan"),
		patchSecret("updating an Orphan Secret", "orphan", `{"stringData":{"key":"rotated"}}`),
		patchSecret("merging into someone else's Secret", "theirs", `{"stringData":{"mine":"v"}}`),
		patchSecret("merging into a Secret another object owns, its owner kept", "foreign", `{"stringData":{"mine":"v"}}`),
		patchSecret("its Secret from Owner to Orphan", "db", `{"metadata":{"ownerReferences":null,"annotations":{"keymount.io/secret-sync-uid":"0a3c8d8e-db"}}}`),
		deleteObject("deleting an Orphan Secret", "secrets", "orphan"),
		createSecret("creating the Secret of SecretSync web", "web", corev1.SecretTypeOpaque, secretSyncOwner("web")),
		deleteObject("deleting the Secret of SecretSync web", "secrets", "web"),
	} {
		if err := r.do(ctx, g.controller, ns); err != nil {
			t.Errorf("the controller: %s: %v, want admitted", r.name, err)
		}
	}
	owner := `{"apiVersion":"secret-sync.x-k8s.io/v1alpha1","kind":"SecretSync","name":"theirs","uid":"0a3c8d8e-theirs"}`
	for _, d := range []denial{
		{patchSecret("taking over someone else's Secret", "theirs", `{"metadata":{"ownerReferences":[`+owner+`]}}`), deniedTakeover},
		{patchSecret("marking someone else's Secret Orphan", "theirs", `{"metadata":{"annotations":{"keymount.io/secret-sync-uid":"x"}}}`), deniedTakeover},
		{patchSecret("removing another object's owner reference", "foreign", `{"metadata":{"ownerReferences":null}}`), deniedOwner},
		{createSecret("an ownerless Secret without the annotation", "plain", corev1.SecretTypeOpaque), deniedOwner},
		{deleteObject("deleting someone else's Secret", "secrets", "theirs"), deniedDeleteOn},
		{deleteObject("deleting a Secret another object owns", "secrets", "foreign"), deniedDeleteOn},
	} {
		wantDenied(t, "the controller", d.r, d.r.do(ctx, g.controller, ns), d.want)
	}
	if s, err := g.admin.CoreV1().Secrets(ns).Get(ctx, "foreign", metav1.GetOptions{}); err != nil || len(s.OwnerReferences) != 1 || string(s.Data["mine"]) != "v" {
		t.Errorf("Secret foreign: %v, %v; want its owner kept and the merged key", s, err)
	}
}

// testControllerAdmitted: what keymount-controller does passes every rail.
func testControllerAdmitted(t *testing.T, g *guardRails, ns string) {
	ctx := t.Context()
	admitted := []request{
		createSecret("creating the Secret of SecretSync web", "web", corev1.SecretTypeOpaque, secretSyncOwner("web")),
		createSecret("creating a TLS Secret", "cert", corev1.SecretTypeTLS, secretSyncOwner("cert")),
		patchSecret("updating its Secret's data", "db", `{"stringData":{"key":"rotated"}}`),
		{name: "server-side apply of a new Secret", do: func(ctx context.Context, c kubernetes.Interface, ns string) error {
			body := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"applied","labels":{"secrets-store.sync.x-k8s.io":""},` +
				`"ownerReferences":[{"apiVersion":"secret-sync.x-k8s.io/v1alpha1","kind":"SecretSync","name":"applied","uid":"0a3c8d8e-applied"}]},` +
				`"type":"Opaque","data":{"key":"dmFsdWU="}}`
			_, err := c.CoreV1().Secrets(ns).Patch(ctx, "applied", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "keymount-controller", Force: new(true)})
			return err
		}},
		tokenRequest("a token for the configured audience, for 600 s", new(int64(600)), policyAudience),
		// Fan-out copies (controller/fanout): created, updated, deleted; a
		// reflector mirror and a copy of ktsstudio/mirrors made copies.
		createCopy("creating a copy", "copy"),
		patchSecret("updating a copy", "copy", `{"stringData":{"key":"new"}}`),
		patchSecret("making a reflector mirror a copy", "mirror", `{"metadata":{"labels":{"`+copyLabel+`":"reflector"}},"stringData":{"k":"v"}}`),
		patchSecret("making a copy mirrors wrote a copy", "by-mirrors", `{"metadata":{"labels":{"`+copyLabel+`":"mirror"}},"stringData":{"k":"v"}}`),
		deleteObject("deleting a copy", "secrets", "copy"),
		configMap("creating a ConfigMap copy", "cm-copy", map[string]string{copyLabel: "reflector"}),
		deleteObject("deleting a ConfigMap copy", "configmaps", "cm-copy"),
	}
	for _, r := range admitted {
		if err := r.do(ctx, g.controller, ns); err != nil {
			t.Errorf("the controller: %s: %v, want admitted", r.name, err)
		}
	}
	// The key of its syncHash (controller/synchash), its own Secret in its own
	// namespace, owned by no SecretSync.
	hashKey := createSecret("creating the key of its syncHash", "keymount-controller-hash-key", corev1.SecretTypeOpaque)
	if err := hashKey.do(ctx, g.controller, namespace); err != nil {
		t.Errorf("the controller: %s: %v, want admitted", hashKey.name, err)
	}
}

// testAdoption: a Secret another tool wrote, left ownerless and annotated
// with its SecretSync's UID by someone who may write it (the live move of
// docs/migrating-from-external-secrets.md), is adopted: the controller may
// make that SecretSync its one owner. It may not adopt one annotated with
// another UID, nor add the annotation itself.
func testAdoption(t *testing.T, g *guardRails, ns string) {
	ctx := t.Context()
	for _, name := range []string{"handed-over", "handed-elsewhere"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"keymount.io/secret-sync-uid": "0a3c8d8e-handed-over"}},
			StringData: map[string]string{"key": "value"}}
		if _, err := g.admin.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	owner := func(name string) string {
		return `{"metadata":{"ownerReferences":[{"apiVersion":"secret-sync.x-k8s.io/v1alpha1","kind":"SecretSync","name":"` + name + `","uid":"0a3c8d8e-` + name + `"}]}}`
	}
	adopt := patchSecret("adopting the Secret annotated with its SecretSync's UID", "handed-over", owner("handed-over"))
	if err := adopt.do(ctx, g.controller, ns); err != nil {
		t.Errorf("the controller: %s: %v, want admitted", adopt.name, err)
	}
	wrong := patchSecret("adopting a Secret annotated with another SecretSync's UID", "handed-elsewhere", owner("handed-elsewhere"))
	wantDenied(t, "the controller", wrong, wrong.do(ctx, g.controller, ns), deniedTakeover)
	self := patchSecret("annotating and adopting someone else's Secret at once", "theirs",
		`{"metadata":{"annotations":{"keymount.io/secret-sync-uid":"0a3c8d8e-theirs"},"ownerReferences":[{"apiVersion":"secret-sync.x-k8s.io/v1alpha1","kind":"SecretSync","name":"theirs","uid":"0a3c8d8e-theirs"}]}}`)
	wantDenied(t, "the controller", self, self.do(ctx, g.controller, ns), deniedTakeover)
}

// testNoSATokens: the controller may not write a service account token
// Secret, and not even when its allowed types are widened to that type by
// hand: the no-sa-tokens rail holds on its own.
func testNoSATokens(t *testing.T, g *guardRails, ns string) {
	ctx := t.Context()
	sa := createSecret("a service account token Secret", "sa", corev1.SecretTypeServiceAccountToken, secretSyncOwner("sa"))
	wantDenied(t, "the controller", sa, sa.do(ctx, g.controller, ns), "kubernetes.io/service-account-token")
	policies := g.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	name := releaseName + "-controller-secret-types"
	patch := `[{"op":"replace","path":"/spec/variables/0/expression","value":"['Opaque', 'kubernetes.io/service-account-token']"}]`
	if _, err := policies.Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once the widened types are in force, the type rail admits the Secret
	// and the no-sa-tokens rail alone denies it.
	var last error
	err := poll.Wait(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		if err := sa.do(ctx, g.controller, ns); ctx.Err() == nil {
			last = err
		}
		return last != nil && strings.Contains(last.Error(), deniedSAToken) && !strings.Contains(last.Error(), deniedType), nil
	})
	if err != nil {
		t.Errorf("with the service account token type allowed, the no-sa-tokens rail never denied %s alone: %v (last answer: %v)", sa.name, err, last)
	}
	wantDenied(t, "the controller", sa, last, deniedSAToken)
}

// waitInForce waits until the API server's admission has loaded every
// policy (each is loaded on its own): a dry run that one rail alone denies
// shows it, for each rail (no-sa-tokens aside: the API server answers with
// the first denial, the types rail's; testNoSATokens waits for it alone).
func (g *guardRails) waitInForce(t *testing.T, ns string) {
	t.Helper()
	dry := []string{metav1.DryRunAll}
	secrets := g.controller.CoreV1().Secrets(ns)
	create := func(s *corev1.Secret) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := secrets.Create(ctx, s, metav1.CreateOptions{DryRun: dry})
			return err
		}
	}
	probes := []struct {
		want string
		do   func(ctx context.Context) error
	}{
		{deniedDelete, func(ctx context.Context) error { return secrets.Delete(ctx, "db", metav1.DeleteOptions{DryRun: dry}) }},
		{deniedCM, func(ctx context.Context) error {
			_, err := g.controller.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{deniedCopyOwn, create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{copyLabel: "reflector"},
			OwnerReferences: []metav1.OwnerReference{secretSyncOwner("probe")}}})},
		{deniedOwner, create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe"}})},
		{deniedType, create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", OwnerReferences: []metav1.OwnerReference{secretSyncOwner("probe")}},
			Type: "example.com/custom"})},
		{deniedAud, func(ctx context.Context) error {
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"probe"}}}
			_, err := g.controller.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "app", tr, metav1.CreateOptions{DryRun: dry})
			return err
		}},
	}
	for _, p := range probes {
		var last error
		err := poll.Wait(t.Context(), 60*time.Second, func(ctx context.Context) (bool, error) {
			last = p.do(ctx)
			return last != nil && strings.Contains(last.Error(), p.want), nil
		})
		if err != nil {
			t.Fatalf("the policies never denied the controller (%q): %v (last answer: %v)", p.want, err, last)
		}
	}
}

// TestControllerAdmissionComponent: components/controller-admission as
// shipped (no token audience) is accepted and type-checked by a real API
// server; the controller may write its SecretSync's Secret but request no
// token at all, and with the component's documented patch (the AWS
// provider's audiences) a token for one of those, and still none for
// another.
func TestControllerAdmissionComponent(t *testing.T) {
	k := kustomize(t, "", "controller-admission")
	var objs []*unstructured.Unstructured
	for _, o := range k.objects {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			objs = append(objs, o)
		}
	}
	g := startGuardRails(t, objs)
	ctx := t.Context()
	ns := g.namespace(t)
	g.waitInForce(t, ns)
	own := createSecret("creating the Secret of SecretSync web", "web", corev1.SecretTypeOpaque, secretSyncOwner("web"))
	if err := own.do(ctx, g.controller, ns); err != nil {
		t.Errorf("the controller: %s: %v, want admitted", own.name, err)
	}
	ttl := new(int64(600))
	for _, aud := range []string{policyAudience, "sts.amazonaws.com"} {
		r := tokenRequest("a token for "+aud+" without configured audiences", ttl, aud)
		wantDenied(t, "the controller", r, r.do(ctx, g.controller, ns), deniedAud)
	}
	policies := g.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	patch := `[{"op":"replace","path":"/spec/variables/0/expression","value":"['sts.amazonaws.com', 'pods.eks.amazonaws.com']"}]`
	if _, err := policies.Patch(ctx, "keymount-controller-token-requests", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	aws := tokenRequest("a token for sts.amazonaws.com with the AWS audiences", ttl, "sts.amazonaws.com")
	var last error
	err := poll.Wait(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		if err := aws.do(ctx, g.controller, ns); ctx.Err() == nil {
			last = err
		}
		return last == nil, nil
	})
	if err != nil {
		t.Errorf("the controller: %s: never admitted: %v (last answer: %v)", aws.name, err, last)
	}
	other := tokenRequest("a token for vault with the AWS audiences", ttl, policyAudience)
	wantDenied(t, "the controller", other, other.do(ctx, g.controller, ns), deniedAud)
	g.waitTypeChecked(t)
}
