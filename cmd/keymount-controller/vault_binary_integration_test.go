//go:build integration && vault

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/syncrequest"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestBinarySyncsFromVault: the keymount-controller binary syncs a
// SecretSync through the keymount-provider-vault binary in its socket
// directory, as the chart runs it as a sidecar: the controller requests a
// token for the audience vault, the provider proves it and logs in to a
// real Vault with Kubernetes auth as the SecretSync's ServiceAccount, and
// the Secret holds the KV value; one login serves the sync.
func TestBinarySyncsFromVault(t *testing.T) {
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
	createNamespaces(t, cs)
	v := vaultenv.Start(t, vaultenv.Options{Kube: env})
	v.Policy(t, "app-read", `path "secret/data/app/*" { capabilities = ["read"] }
path "secret/metadata/app/*" { capabilities = ["read"] }`)
	v.KubernetesRole(t, vaultenv.Role{Name: "app", Namespace: "app", ServiceAccount: "app", Policies: []string{"app-read"}})
	v.PutKVv2(t, "app/db", map[string]any{"password": "from-vault"})

	sockDir, err := sockettest.MkdirTemp("kmcv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	startBinary(t, buildProvider(t), []string{"--provider-dir=" + sockDir, "--kubeconfig=" + kubeconfig},
		"VAULT_TOKEN="+v.RootToken) // ignored: every login uses the caller's token
	startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + sockDir, "--token-request-audience=vault",
		"--rotation-poll-interval=0s", "--metrics-bind-address=" + freeAddr(t), "--health-probe-bind-address=" + freeAddr(t),
	}, syncrequest.EnvPodNamespace+"=keymount-system", syncrequest.EnvPodName+"=keymount-controller-0")

	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "vault-db"},
		Spec: secretsstorev1.SecretProviderClassSpec{Provider: "vault", Parameters: map[string]string{
			"vaultAddress": v.Addr, "roleName": "app",
			"objects": "- objectName: password\n  secretPath: secret/data/app/db\n  secretKey: password\n",
		}},
	}
	ss := &ss1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"},
		Spec: ss1.SecretSyncSpec{SecretProviderClassName: "vault-db", ServiceAccountName: "app", SecretObject: ss1.SecretObject{
			Type: "Opaque", Data: []ss1.SecretObjectData{{SourcePath: "password", TargetKey: "password"}},
		}},
	}
	for _, o := range []client.Object{class, ss} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "the Secret from Vault", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := c.Get(ctx, types.NamespacedName{Namespace: "app", Name: "db"}, &s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return string(s.Data["password"]) == "from-vault", nil
	})
	a := v.Audit(t)
	if got := a.Count("update", "auth/kubernetes/login"); got != 1 {
		t.Errorf("%d Kubernetes logins, want 1", got)
	}
	if got := a.Count("read", "secret/data/app/db"); got < 1 {
		t.Errorf("%d reads of secret/data/app/db, want the value read with the login's token", got)
	}
}

// buildProvider builds keymount-provider-vault into a temporary directory.
func buildProvider(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test builds the provider and needs the go command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "keymount-provider-vault")
	if out, err := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "../keymount-provider-vault").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
