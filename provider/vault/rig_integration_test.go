//go:build integration && vault

package vault_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/aws/kubeclient"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/provider/vault/spec"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/vaultenv"
)

// eventually bounds every wait on a condition: generous for a loaded
// machine.
const eventually = 2 * time.Minute

// appPolicy is what the test roles may do.
const appPolicy = `
path "secret/data/*" { capabilities = ["read"] }
path "secret/metadata/*" { capabilities = ["read"] }
path "kv1/*" { capabilities = ["read"] }
path "pki/issue/*" { capabilities = ["create", "update"] }
path "aws/creds/*" { capabilities = ["read"] }
`

// rig is a real API server and a real Vault with Kubernetes auth against
// it; each test makes providers of its own.
type rig struct {
	env   *k8senv.Env
	kube  kubernetes.Interface
	vault *vaultenv.Vault
	// tokens proves tokens as the binary does: the API server's issuer keys.
	tokens *satoken.Verifier
}

func newRig(t *testing.T) *rig {
	t.Helper()
	// Own control plane: the package's one test that needs one (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{})
	v := vaultenv.Start(t, vaultenv.Options{Kube: env, AWSEndpoint: motoserver.Start(t)})
	cs, err := kubeclient.ForConfig(env.Config, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := satoken.New(satoken.Config{}, cs)
	if err != nil {
		t.Fatal(err)
	}
	v.Policy(t, "app", appPolicy)
	return &rig{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), vault: v, tokens: tokens}
}

// provider returns a new provider of Vault's address.
func (r *rig) provider(t *testing.T, cfg vault.Config) *vault.Provider {
	t.Helper()
	cfg.Address = r.vault.Addr
	p, err := vault.New(cfg, r.tokens)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// identity creates namespace/sa and a Vault role of the same name bound to
// it with the app policy.
func (r *rig) identity(t *testing.T, ns, sa string, role vaultenv.Role) {
	t.Helper()
	ctx := t.Context()
	_, _ = r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_, _ = r.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	role.Namespace, role.ServiceAccount = ns, sa
	if role.Name == "" {
		role.Name = sa
	}
	if role.Policies == nil {
		role.Policies = []string{"app"}
	}
	r.vault.KubernetesRole(t, role)
}

// pod creates a pod of sa in ns.
func (r *rig) pod(t *testing.T, ns, sa, name string) *corev1.Pod {
	t.Helper()
	pod, err := r.kube.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// token mints a token of the pod's service account bound to the pod, as
// kubelet does for the CSIDriver's tokenRequests.
func (r *rig) token(t *testing.T, pod *corev1.Pod, sa, audience string) string {
	t.Helper()
	tr, err := r.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	return tr.Status.Token
}

// mount is what the driver sends for pod's volume of a class with params.
type mount struct {
	pod     *corev1.Pod
	params  map[string]string
	token   string // default: a fresh token of the pod, audience vault
	current map[string]string
	// stage sends the driver's first-publish target: a staging directory
	// beside the volume's mount directory.
	stage bool
	// target replaces the kubelet target path (a SecretSync's
	// /mnt/secrets-store).
	target string
}

func (r *rig) mount(t *testing.T, p *vault.Provider, m mount) (*server.MountResult, error) {
	t.Helper()
	if m.token == "" {
		m.token = r.token(t, m.pod, m.pod.Spec.ServiceAccountName, "vault")
	}
	tokens, _ := json.Marshal(map[string]any{"vault": map[string]string{"token": m.token, "expirationTimestamp": time.Now().Add(time.Hour).Format(time.RFC3339)}})
	attrs := map[string]string{
		spec.KeyPodName: m.pod.Name, spec.KeyPodNamespace: m.pod.Namespace, spec.KeyPodUID: string(m.pod.UID),
		spec.KeyServiceAccount: m.pod.Spec.ServiceAccountName, spec.KeyTokens: string(tokens), spec.KeyClass: "vault-class",
		"csi.storage.k8s.io/ephemeral": "true",
	}
	for k, v := range m.params {
		attrs[k] = v
	}
	target := "/var/lib/kubelet/pods/" + string(m.pod.UID) + "/volumes/kubernetes.io~csi/vault/mount"
	if m.stage {
		target = filepath.Join(filepath.Dir(target), "keymount-stage-0123456789abcdef")
	}
	if m.target != "" {
		target = m.target
	}
	ctx, cancel := context.WithTimeout(t.Context(), eventually)
	defer cancel()
	return p.Mount(ctx, &server.MountRequest{
		Attributes: attrs, Secrets: map[string]string{}, Permission: 0o644, CurrentVersions: m.current, TargetPath: target,
	})
}

// mustMount mounts and fails the test on an error.
func (r *rig) mustMount(t *testing.T, p *vault.Provider, m mount) *server.MountResult {
	t.Helper()
	res, err := r.mount(t, p, m)
	if err != nil {
		t.Fatalf("mount of %s/%s: %v", m.pod.Namespace, m.pod.Name, err)
	}
	return res
}

// files maps a result's file names to contents; versions likewise.
func files(res *server.MountResult) (map[string]string, map[string]string) {
	f, v := map[string]string{}, map[string]string{}
	for _, x := range res.Files {
		f[x.Path] = string(x.Contents)
	}
	for _, x := range res.Versions {
		v[x.ID] = x.Version
	}
	return f, v
}

// count is a successful-request counter of the audit log.
func (r *rig) count(t *testing.T, operation, prefix string) int {
	t.Helper()
	return r.vault.Audit(t).Count(operation, prefix)
}

// params is a class's parameters: role and objects.
func params(role, objects string, extra ...string) map[string]string {
	p := map[string]string{spec.KeyRole: role, spec.KeyObjects: strings.TrimSpace(objects)}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return p
}
