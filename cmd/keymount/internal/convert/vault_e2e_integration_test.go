//go:build integration && vault

package convert_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/cmd/keymount/internal/convert"
	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/aws/kubeclient"
	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/vaultenv"
)

// vaultInput is what a team runs with External Secrets against Vault:
// a KV v2 SecretStore (Kubernetes auth as ServiceAccount app) with an
// ExternalSecret of string, number and boolean fields, one of an older
// version, and template metadata, and one extracting every field; a KV v1
// SecretStore; and an
// external-secrets.io/v1beta1 ClusterSecretStore whose conditions admit the
// namespace, with an engine v2 template merged into the data. VAULT is the
// server's address.
const vaultInput = `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: kv2, namespace: vteam}
spec:
  provider:
    vault:
      server: VAULT
      path: secret
      version: v2
      auth: {kubernetes: {mountPath: kubernetes, role: vteam-app, serviceAccountRef: {name: app}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: db, namespace: vteam}
spec:
  refreshInterval: 1h
  secretStoreRef: {name: kv2, kind: SecretStore}
  target:
    name: db-credentials
    template:
      metadata:
        labels: {app: billing}
        annotations: {team.example/owner: billing}
  data:
  - {secretKey: username, remoteRef: {key: vteam/db, property: username}}
  - {secretKey: password, remoteRef: {key: vteam/db, property: password}}
  - {secretKey: port, remoteRef: {key: vteam/db, property: port}}
  - {secretKey: tls, remoteRef: {key: vteam/db, property: tls}}
  - {secretKey: first-password, remoteRef: {key: vteam/db, property: password, version: "1"}}
---
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: kv1, namespace: vteam}
spec:
  provider:
    vault:
      server: VAULT
      path: kv1
      version: v1
      auth: {kubernetes: {role: vteam-app, serviceAccountRef: {name: app}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: legacy, namespace: vteam}
spec:
  secretStoreRef: {name: kv1}
  data:
  - {secretKey: api-key, remoteRef: {key: vteam/legacy, property: api-key}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: all-db, namespace: vteam}
spec:
  secretStoreRef: {name: kv2}
  dataFrom:
  - extract: {key: vteam/db}
---
apiVersion: external-secrets.io/v1beta1
kind: ClusterSecretStore
metadata: {name: shared-vault}
spec:
  conditions:
  - namespaceRegexes: ["^vteam$"]
  provider:
    vault:
      server: VAULT
      path: secret
      auth: {kubernetes: {role: vteam-app, serviceAccountRef: {name: app, namespace: vteam}}}
---
apiVersion: external-secrets.io/v1beta1
kind: ExternalSecret
metadata: {name: dsn, namespace: vteam}
spec:
  secretStoreRef: {name: shared-vault, kind: ClusterSecretStore}
  target:
    template:
      engineVersion: v2
      mergePolicy: Merge
      data:
        dsn: 'postgres://{{ .username }}:{{ .password }}@db:{{ .port }}/billing'
  data:
  - {secretKey: username, remoteRef: {key: vteam/db, property: username}}
  - {secretKey: password, remoteRef: {key: vteam/db, property: password}}
  - {secretKey: port, remoteRef: {key: vteam/db, property: port}}
`

// TestConvertedVaultSecretsMatchExternalSecrets is point 5's Vault part:
// three Vault ExternalSecrets (KV v2 with a version and metadata, KV v1, a
// v1beta1 ClusterSecretStore with a merged template), converted, applied
// to a real API server with keymount-controller and keymount's Vault
// provider against a real Vault (Kubernetes auth as the ServiceAccount the
// stores name), make the Secrets External Secrets makes from the same
// values, byte for byte: a string field as it is, a number or boolean as
// its JSON text (ESO's Vault provider marshals non-strings), the version
// asked for, templates over those values.
func TestConvertedVaultSecretsMatchExternalSecrets(t *testing.T) {
	// Vault's Kubernetes auth reviews the API server's tokens: it starts
	// with the cluster, before the provider.
	var v *vaultenv.Vault
	cl, _ := startControllerCluster(t, "vault", k8senv.Options{}, func(env *k8senv.Env, dir string) {
		v = vaultenv.Start(t, vaultenv.Options{Kube: env})
		kc, err := kubeclient.ForConfig(env.Config, 50, 100)
		if err != nil {
			t.Fatal(err)
		}
		tokens, err := satoken.New(satoken.Config{}, kc)
		if err != nil {
			t.Fatal(err)
		}
		p, err := vault.New(vault.Config{}, tokens)
		if err != nil {
			t.Fatal(err)
		}
		go p.Run(t.Context())
		ctrltest.ServeProvider(t, dir, "vault", p)
	})
	v.Policy(t, "vteam-read", `path "secret/data/vteam/*" { capabilities = ["read"] }
path "kv1/vteam/*" { capabilities = ["read"] }`)
	v.KubernetesRole(t, vaultenv.Role{Name: "vteam-app", Namespace: "vteam", ServiceAccount: "app", Policies: []string{"vteam-read"}})
	first := "pw-" + randomHex(t)
	v.PutKVv2(t, "vteam/db", map[string]any{"username": "billing", "password": first, "port": 5432, "tls": true})
	password := "pw-" + randomHex(t)
	v.PutKVv2(t, "vteam/db", map[string]any{"username": "billing", "password": password, "port": 5432, "tls": true})
	apiKey := "key-" + randomHex(t)
	v.Write(t, "kv1/vteam/legacy", map[string]any{"api-key": apiKey})

	cl.namespace(t, "vteam")
	if err := cl.c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "vteam", Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	out := convertInput(t, strings.ReplaceAll(vaultInput, "VAULT", v.Addr), convert.Options{})
	if got := createEach(t, cl, out); len(got) != 8 {
		t.Fatalf("applied %v, want a class and a SecretSync per ExternalSecret", got)
	}

	want := map[string]wantSecret{
		"db-credentials": {typ: corev1.SecretTypeOpaque, labels: map[string]string{"app": "billing"},
			annotations: map[string]string{"team.example/owner": "billing"},
			data: map[string][]byte{
				"username": []byte("billing"), "password": []byte(password), "port": []byte("5432"), "tls": []byte("true"),
				"first-password": []byte(first),
			}},
		"legacy": {typ: corev1.SecretTypeOpaque, data: map[string][]byte{"api-key": []byte(apiKey)}},
		// dataFrom.extract: every field a key, a number or boolean as its
		// JSON text.
		"all-db": {typ: corev1.SecretTypeOpaque, data: map[string][]byte{
			"username": []byte("billing"), "password": []byte(password), "port": []byte("5432"), "tls": []byte("true"),
		}},
		// mergePolicy Merge: the data keys and the templated one.
		"dsn": {typ: corev1.SecretTypeOpaque, data: map[string][]byte{
			"username": []byte("billing"), "password": []byte(password), "port": []byte("5432"),
			"dsn": []byte("postgres://billing:" + password + "@db:5432/billing"),
		}},
	}
	for name, w := range want {
		got := waitSecretIn(t, cl, "vteam", name, w.data)
		w.check(t, got)
	}
}
