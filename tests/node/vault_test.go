//go:build vault

package node_test

import (
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/vaultenv"
)

// vaultProviderUser is the Vault provider's identity at the API server.
const vaultProviderUser = "keymount-node-provider-vault"

// TestVaultProviderInRealPod: keymount-provider-vault, with the shipped
// ClusterRole (deploy/providers/vault/rbac.yaml) and a real Vault on
// 127.0.0.1 whose Kubernetes auth reviews tokens with the node's API
// server, serves an unchanged vault-csi-provider class (provider: vault,
// roleName, audience, objects) to a real pod: a Job whose container reads
// a KV v2 secret from its volume completes, logging in with the token
// kubelet minted for the pod.
func TestVaultProviderInRealPod(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	ctx := t.Context()

	v := vaultenv.Start(t, vaultenv.Options{Kube: n.Env})
	v.Policy(t, "node-reader", `path "secret/data/*" { capabilities = ["read"] }`)
	// The CSIDriver asks kubelet for tokens of tokenAudience only: the
	// class and the role name it.
	v.KubernetesRole(t, vaultenv.Role{Name: "app", Namespace: ns, ServiceAccount: "default",
		Policies: []string{"node-reader"}, Audience: tokenAudience})
	value := "vault-" + randomHex(8)
	forbidden.add(value, "the secret stored in Vault")
	v.PutKVv2(t, ns+"/db", map[string]any{"password": value})

	role := shippedClusterRole(t, "deploy/providers/vault/rbac.yaml")
	role.Name = vaultProviderUser
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: vaultProviderUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: vaultProviderUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: vaultProviderUser}},
	}
	if err := n.Ctrl.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := n.Ctrl.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _ := n.Env.KubeconfigFor(t, vaultProviderUser, nil)
	provider := n.Run(t, "keymount-provider-vault", "keymount-provider-vault", nil,
		"--provider-dir="+n.ProviderDir, "--vault-addr="+v.Addr, "--kubeconfig="+kubeconfig, "-v=10")
	t.Cleanup(func() { provider.Stop(t) })
	n.WaitSocket(t, provider, filepath.Join(n.ProviderDir, "vault.sock"))

	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault-db"},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider: "vault",
			Parameters: map[string]string{"roleName": "app", "audience": tokenAudience, "objects": `
- objectName: password
  secretPath: secret/data/` + ns + `/db
  secretKey: password
`},
		},
	}
	if err := n.Ctrl.Create(ctx, spc); err != nil {
		t.Fatal(err)
	}
	lines := runJob(t, n, ns, "vault-reader", "vault-db", "show", mountPath+"/password")
	if !containsFunc(lines, hasContent("password", value)) {
		t.Errorf("the Job's container printed %q, want the password from Vault", lines)
	}
	if got := v.Audit(t).Count("update", "auth/kubernetes/login"); got != 1 {
		t.Errorf("Vault's audit log holds %d Kubernetes logins, want 1 (the Job's pod)", got)
	}
}

// shippedClusterRole is the one ClusterRole of the repository's manifest
// rel.
func shippedClusterRole(t *testing.T, rel string) *rbacv1.ClusterRole {
	t.Helper()
	var out *rbacv1.ClusterRole
	for _, obj := range node(t).Manifest(t, rel) {
		if obj.GetObjectKind().GroupVersionKind().Kind != "ClusterRole" {
			continue
		}
		if out != nil {
			t.Fatalf("%s holds more than one ClusterRole", rel)
		}
		out = &rbacv1.ClusterRole{}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, out); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	if out == nil {
		t.Fatalf("%s holds no ClusterRole", rel)
	}
	return out
}
