//go:build integration && vault

package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestBinarySyncsFromVault: the keymount-controller binary syncs a
// SecretSync through the keymount-provider-vault binary in its socket
// directory, as the chart runs it as a sidecar: the controller requests a
// token for the audience vault, the provider proves it and logs in to a
// real Vault with Kubernetes auth as the SecretSync's ServiceAccount, and
// the Secret holds the KV value; one login serves the sync.
func TestBinarySyncsFromVault(t *testing.T) {
	env, _, c := startCluster(t)
	v := vaultenv.Start(t, vaultenv.Options{Kube: env})
	v.Policy(t, "app-read", `path "secret/data/app/*" { capabilities = ["read"] }
path "secret/metadata/app/*" { capabilities = ["read"] }`)
	v.KubernetesRole(t, vaultenv.Role{Name: "app", Namespace: "app", ServiceAccount: "app", Policies: []string{"app-read"}})
	v.PutKVv2(t, "app/db", map[string]any{"password": "from-vault"})

	sockDir := sockettest.Dir(t)
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	startBinary(t, goBuild(t, "../keymount-provider-vault", "keymount-provider-vault"), []string{"--provider-dir=" + sockDir, "--kubeconfig=" + kubeconfig},
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
	create(t, c, class, ss)
	poll.Until(t, "the Secret from Vault", secretHolds(c, "app", "password", "from-vault"))
	a := v.Audit(t)
	if got := a.Count("update", "auth/kubernetes/login"); got != 1 {
		t.Errorf("%d Kubernetes logins, want 1", got)
	}
	if got := a.Count("read", "secret/data/app/db"); got < 1 {
		t.Errorf("%d reads of secret/data/app/db, want the value read with the login's token", got)
	}
}
