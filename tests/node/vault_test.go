//go:build vault

package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
	"github.com/keymount/keymount/tests/vaultenv"
)

// vaultProviderUser is the Vault provider's identity at the API server.
const vaultProviderUser = "keymount-node-provider-vault"

// vaultPolicy is what the test roles may do.
const vaultPolicy = `
path "secret/data/*" { capabilities = ["read"] }
path "pki/issue/*" { capabilities = ["create", "update"] }
path "sys/leases/revoke" { capabilities = ["update"] }
`

// TestVaultProviderInRealPod: keymount-provider-vault, with the shipped
// ClusterRole (deploy/providers/vault/rbac.yaml), serves unchanged
// vault-csi-provider classes (provider: vault, roleName, audience, objects)
// to real pods, against a real Vault on 127.0.0.1 whose Kubernetes auth
// reviews the tokens kubelet minted with the node's API server.
func TestVaultProviderInRealPod(t *testing.T) {
	t.Parallel()
	n := node(t)
	v := vaultenv.Start(t, vaultenv.Options{Kube: n.Env})
	v.Policy(t, "node-app", vaultPolicy)
	v.PKIRole(t, "node", time.Hour, true)
	startVaultProvider(t, n, v)
	// Subtests one after the other: they count Vault's audit log.
	t.Run("JobCompletes", func(t *testing.T) { testVaultJob(t, n, v) })
	t.Run("ReplicasShareOneCertificate", func(t *testing.T) { testVaultReplicas(t, n, v) })
	t.Run("RefreshKeepsTheVolumesCertificate", func(t *testing.T) { testVaultRefresh(t, n, v) })
	t.Run("DeletedPodsCertificateRevoked", func(t *testing.T) { testVaultRevokeAtDeletion(t, n, v) })
}

// testVaultRevokeAtDeletion: a pod of a class with revokeOnUnpublish is
// deleted; kubelet unpublishes its volume, keymount's driver tells the
// provider (keymount's provider extension), and Vault revokes the
// certificate the pod mounted. The provider runs with --volume-idle far
// away: only that call can revoke it within the test.
func testVaultRevokeAtDeletion(t *testing.T, n *nodeenv.Node, v *vaultenv.Vault) {
	ns := certificateClass(t, n, v, "c.example.com", map[string]string{"revokeOnUnpublish": "true"})
	pod := createPod(t, n, ns, "app", "vault-cert", "show", "-follow", mountPath+"/serial")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	line := n.WaitLog(t, pod, "probe", "the certificate's serial", func(l string) bool { return strings.HasPrefix(l, fileLine("serial")) })
	_, quoted, _ := strings.Cut(line, " content=")
	serial, err := strconv.Unquote(quoted)
	if err != nil || serial == "" {
		t.Fatalf("the serial in %q: %v", line, err)
	}
	if v.CertificateRevoked(t, serial) {
		t.Fatal("the certificate is revoked while its pod runs")
	}
	if err := n.Kube.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = poll.Wait(t.Context(), nodeenv.PodTimeout, func(context.Context) (bool, error) {
		return v.CertificateRevoked(t, serial), nil
	})
	if err != nil {
		t.Fatalf("waiting for the deleted pod's certificate to be revoked: %v", err)
	}
}

// testVaultRefresh: a pod's volume of a PKI certificate keeps the one
// certificate issued at its first publish through kubelet's republishes
// (the node's driver refreshes on every one), though the driver's first
// publish and its refreshes send the provider different target paths.
func testVaultRefresh(t *testing.T, n *nodeenv.Node, v *vaultenv.Vault) {
	ns := certificateClass(t, n, v, "b.example.com", nil)
	issued := v.Audit(t).Count("update", "pki/issue/node")
	pod := createPod(t, n, ns, "app", "vault-cert", "show", "-follow", mountPath+"/serial")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the certificate's serial", func(l string) bool { return strings.HasPrefix(l, fileLine("serial")) })
	// A refresh: a provider call naming the pod's mount directory (the
	// first publish names a staging directory).
	refresh := "/pods/" + string(pod.UID) + "/volumes/kubernetes.io~csi/secrets/mount\""
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(context.Context) (bool, error) {
		log, err := os.ReadFile(n.LogPath("keymount-provider-vault"))
		return strings.Contains(string(log), refresh), err
	})
	if err != nil {
		t.Fatalf("waiting for a refresh of the pod's volume: %v", err)
	}
	if d := v.Audit(t).Count("update", "pki/issue/node") - issued; d != 1 {
		t.Errorf("Vault issued %d certificates for one volume and its refresh, want 1", d)
	}
}

// testVaultJob: a Job whose container reads a KV v2 secret from its volume
// completes, with one login.
func testVaultJob(t *testing.T, n *nodeenv.Node, v *vaultenv.Vault) {
	ns := namespace(t, n)
	vaultRole(t, v, ns)
	value := "vault-" + randomHex(8)
	forbidden.add(value, "the secret stored in Vault")
	v.PutKVv2(t, ns+"/db", map[string]any{"password": value})
	vaultClass(t, n, ns, "vault-db", nil, `
- objectName: password
  secretPath: secret/data/`+ns+`/db
  secretKey: password
`)
	logins := v.Audit(t).Count("update", "auth/kubernetes/login")
	lines := runJob(t, n, ns, "vault-reader", "vault-db", "show", mountPath+"/password")
	if !containsFunc(lines, hasContent("password", value)) {
		t.Errorf("the Job's container printed %q, want the password from Vault", lines)
	}
	if d := v.Audit(t).Count("update", "auth/kubernetes/login") - logins; d != 1 {
		t.Errorf("Vault's audit log holds %d Kubernetes logins for the Job's pod, want 1", d)
	}
}

// testVaultReplicas: the two replicas of a Deployment whose class asks for
// shareAcrossReplicas mount the same PKI certificate, issued once, with one
// login for both.
func testVaultReplicas(t *testing.T, n *nodeenv.Node, v *vaultenv.Vault) {
	ns := certificateClass(t, n, v, "a.example.com", map[string]string{"shareAcrossReplicas": "true"})
	audit := v.Audit(t)
	issued, logins := audit.Count("update", "pki/issue/node"), audit.Count("update", "auth/kubernetes/login")
	tmpl := n.ProbePod(ns, "", "show", "-follow", mountPath+"/serial")
	tmpl.Labels = map[string]string{"app": "shared"}
	withVolume(&tmpl.Spec, "vault-cert")
	replicas := int32(2)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec},
		},
	}
	if _, err := n.Kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment: %v", err)
	}
	pods := runningPods(t, n, ns, "app=shared", int(replicas))
	serials := map[string]bool{}
	for i := range pods {
		line := n.WaitLog(t, &pods[i], "probe", "the certificate's serial", func(l string) bool { return strings.HasPrefix(l, fileLine("serial")) })
		_, content, _ := strings.Cut(line, " content=")
		serials[content] = true
	}
	if len(serials) != 1 {
		t.Errorf("the replicas mounted %d certificates %v, want one shared", len(serials), serials)
	}
	audit = v.Audit(t)
	if d := audit.Count("update", "pki/issue/node") - issued; d != 1 {
		t.Errorf("Vault issued %d certificates for two replicas with shareAcrossReplicas, want 1", d)
	}
	if d := audit.Count("update", "auth/kubernetes/login") - logins; d != 1 {
		t.Errorf("Vault's audit log holds %d Kubernetes logins for two replicas of one service account, want 1", d)
	}
}

// startVaultProvider runs keymount-provider-vault on the node with the
// shipped ClusterRole bound to its user, against v.
func startVaultProvider(t *testing.T, n *nodeenv.Node, v *vaultenv.Vault) {
	t.Helper()
	role := shippedClusterRole(t, n, "deploy/providers/vault/rbac.yaml")
	role.Name = vaultProviderUser
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: vaultProviderUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: vaultProviderUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: vaultProviderUser}},
	}
	if err := n.Ctrl.Create(t.Context(), role); err != nil {
		t.Fatal(err)
	}
	if err := n.Ctrl.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _ := n.Env.KubeconfigFor(t, vaultProviderUser, nil)
	provider := n.Run(t, "keymount-provider-vault", "keymount-provider-vault", nil,
		"--provider-dir="+n.ProviderDir, "--vault-addr="+v.Addr, "--kubeconfig="+kubeconfig, "-v=10",
		// Only keymount's driver telling of an unpublish lets go of a
		// volume within a test (DeletedPodsCertificateRevoked).
		"--volume-idle=1000h")
	t.Cleanup(func() { provider.Stop(t) })
	n.WaitSocket(t, provider, filepath.Join(n.ProviderDir, "vault.sock"))
}

// certificateClass makes a namespace with its Vault role and a class
// vault-cert (with the extra parameters) whose file serial is the serial
// number of a PKI certificate for commonName, and returns the namespace.
func certificateClass(t *testing.T, n *nodeenv.Node, v *vaultenv.Vault, commonName string, extra map[string]string) string {
	t.Helper()
	ns := namespace(t, n)
	vaultRole(t, v, ns)
	vaultClass(t, n, ns, "vault-cert", extra, `
- objectName: serial
  secretPath: pki/issue/node
  method: PUT
  secretArgs: {common_name: `+commonName+`}
  secretKey: serial_number
`)
	return ns
}

// vaultRole adds a Vault role named app for the default service account
// of ns. The CSIDriver asks kubelet for tokens of tokenAudience only: the
// role and the classes name it.
func vaultRole(t *testing.T, v *vaultenv.Vault, ns string) {
	t.Helper()
	v.KubernetesRole(t, vaultenv.Role{Name: "app-" + ns, Namespace: ns, ServiceAccount: "default",
		Policies: []string{"node-app"}, Audience: tokenAudience})
}

// vaultClass creates a class of the Vault provider for ns's role with
// objects and the extra parameters.
func vaultClass(t *testing.T, n *nodeenv.Node, ns, name string, extra map[string]string, objects string) {
	t.Helper()
	params := map[string]string{"roleName": "app-" + ns, "audience": tokenAudience, "objects": objects}
	for k, val := range extra {
		params[k] = val
	}
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "vault", Parameters: params},
	}
	if err := n.Ctrl.Create(t.Context(), spc); err != nil {
		t.Fatalf("create SecretProviderClass %s/%s: %v", ns, name, err)
	}
}

// runningPods waits until exactly want pods of ns matching selector run,
// and returns them.
func runningPods(t *testing.T, n *nodeenv.Node, ns, selector string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		list, err := n.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if nodeenv.Running(&p) {
				pods = append(pods, p)
			}
		}
		return len(pods) == want && len(list.Items) == want, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d running pods %s in %s: %v (%d running)", want, selector, ns, err, len(pods))
	}
	return pods
}

// shippedClusterRole is the one ClusterRole of the repository's manifest
// rel.
func shippedClusterRole(t *testing.T, n *nodeenv.Node, rel string) *rbacv1.ClusterRole {
	t.Helper()
	var out *rbacv1.ClusterRole
	for _, obj := range n.Manifest(t, rel) {
		if obj.GetObjectKind().GroupVersionKind().Kind != "ClusterRole" {
			continue
		}
		if out != nil {
			t.Fatalf("%s holds more than one ClusterRole", rel)
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		out = &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, out); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	if out == nil {
		t.Fatalf("%s holds no ClusterRole", rel)
	}
	return out
}
