//go:build integration && vault

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"
	"github.com/keymount/keymount/internal/vaultkv"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
	"github.com/keymount/keymount/tests/vaultenv"
)

// acrossClusters holds the manifests docs/copying-secrets.md ("Across
// clusters") shows; this test applies them as they are, but for Vault's
// address and the AppRole's IDs.
const acrossClusters = "../../examples/across-clusters"

// exampleVaultAddr is the Vault address the examples name.
const exampleVaultAddr = "https://vault.example.com:8200"

// TestOneCertificateForEveryCluster runs the guide's "Across clusters" on
// two real API servers, one real Vault and two keymount-controller
// binaries: cert-manager's kubernetes.io/tls Secret in cluster A is pushed
// to Vault (SecretMirror destination.type vault, Kubernetes auth); a
// SecretMirror in cluster B reads it back (AppRole) into every
// ^project-c-.+ namespace. The type and every byte are the same at each
// step, a renewal in A reaches every copy in B, a namespace created later
// gets its copy, and no other namespace does.
func TestOneCertificateForEveryCluster(t *testing.T) {
	envA, csA, cA := startCluster(t)
	envB, csB, cB := startCluster(t)
	v := vaultenv.Start(t, vaultenv.Options{Kube: envA})
	v.Policy(t, "pusher", readExample(t, "pusher.hcl"))
	v.Policy(t, "reader", readExample(t, "reader.hcl"))
	namespace(t, csA, "cert-manager")
	for _, ns := range []string{"platform", "project-c-1", "project-c-2", "other"} {
		namespace(t, csB, ns)
	}
	v.KubernetesRole(t, vaultenv.Role{Name: "cluster-a-pusher", Namespace: "cert-manager", ServiceAccount: "vault-pusher", Policies: []string{"pusher"}})
	roleID, secretID := appRole(t, v, "cluster-b-reader", "reader")

	// cert-manager's Secret, as it writes one.
	chain := tlsbundletest.NewChain(t)
	cert := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cert-manager", Name: "wildcard-tls",
			Annotations: map[string]string{"cert-manager.io/certificate-name": "wildcard", "cert-manager.io/issuer-name": "ca"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": chain.CertsPEM(), "tls.key": chain.PKCS8PEM(t), "ca.crt": tlsbundletest.CertPEM(chain.CA)},
	}
	create(t, cA, cert)
	applyExample(t, cA, "cluster-a.yaml", strings.NewReplacer(exampleVaultAddr, v.Addr))
	applyExample(t, cB, "cluster-b.yaml", strings.NewReplacer(exampleVaultAddr, v.Addr,
		"REPLACE-WITH-ROLE-ID", roleID, "REPLACE-WITH-SECRET-ID", secretID))
	runController(t, envA, "--token-request-audience=vault")
	runController(t, envB)

	const path = "secret/data/shared/wildcard-tls"
	everyCopy := func(want *corev1.Secret, namespaces ...string) {
		t.Helper()
		for _, ns := range namespaces {
			poll.Until(t, "the certificate in cluster B's "+ns, func(ctx context.Context) (bool, error) {
				s, err := csB.CoreV1().Secrets(ns).Get(ctx, "wildcard-tls", metav1.GetOptions{})
				if err != nil {
					return false, client.IgnoreNotFound(err)
				}
				return s.Type == want.Type && sameData(s.Data, want.Data), nil
			})
		}
	}
	inVault := func(want *corev1.Secret) int {
		t.Helper()
		var version int
		poll.Until(t, "the certificate in Vault", func(ctx context.Context) (bool, error) {
			s, err := v.Client.Logical().ReadWithContext(ctx, path)
			if err != nil || s == nil {
				return false, err
			}
			fields, _ := s.Data["data"].(map[string]any)
			md, _ := s.Data["metadata"].(map[string]any)
			if !sameData(vaultkv.Decode(fields).Data, want.Data) || vaultkv.TypeOf(md["custom_metadata"]) != want.Type {
				return false, nil
			}
			num, ok := md["version"].(interface{ Int64() (int64, error) })
			if !ok {
				return false, fmt.Errorf("metadata.version %v is not a number", md["version"])
			}
			n, err := num.Int64()
			version = int(n)
			return true, err
		})
		return version
	}
	if got := inVault(cert); got != 1 {
		t.Errorf("the first push is version %d, want 1", got)
	}
	everyCopy(cert, "project-c-1", "project-c-2")

	// cert-manager renews the certificate.
	renewed := tlsbundletest.NewChain(t)
	cert.Data = map[string][]byte{"tls.crt": renewed.CertsPEM(), "tls.key": renewed.PKCS8PEM(t), "ca.crt": tlsbundletest.CertPEM(renewed.CA)}
	start := time.Now()
	if err := cA.Update(t.Context(), cert); err != nil {
		t.Fatal(err)
	}
	if got := inVault(cert); got != 2 {
		t.Errorf("the renewal is version %d in Vault, want 2", got)
	}
	pushed := time.Since(start)
	everyCopy(cert, "project-c-1", "project-c-2")
	t.Logf("the renewal reached Vault after %v and every copy in cluster B after %v (cluster B polls every 10 s)", pushed, time.Since(start))

	namespace(t, csB, "project-c-3")
	everyCopy(cert, "project-c-3")
	for _, ns := range []string{"other", "platform"} {
		if _, err := csB.CoreV1().Secrets(ns).Get(t.Context(), "wildcard-tls", metav1.GetOptions{}); err == nil {
			t.Errorf("a copy in cluster B's %s, which ^project-c-.+ does not match", ns)
		}
	}
}

// sameData tells whether a and b hold the same keys with the same bytes.
func sameData(a, b map[string][]byte) bool {
	if !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))) {
		return false
	}
	for k := range a {
		if !bytes.Equal(a[k], b[k]) {
			return false
		}
	}
	return true
}

func namespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// appRole enables AppRole on v and returns the role ID and a secret ID of
// a new role with policy.
func appRole(t *testing.T, v *vaultenv.Vault, role, policy string) (string, string) {
	t.Helper()
	v.Write(t, "sys/auth/approle", map[string]any{"type": "approle"})
	v.Write(t, "auth/approle/role/"+role, map[string]any{"token_policies": policy, "token_ttl": "1h"})
	rid, err := v.Client.Logical().ReadWithContext(t.Context(), "auth/approle/role/"+role+"/role-id")
	if err != nil || rid == nil {
		t.Fatalf("role-id: %v", err)
	}
	sid := v.Write(t, "auth/approle/role/"+role+"/secret-id", map[string]any{})
	r, ok1 := rid.Data["role_id"].(string)
	s, ok2 := sid.Data["secret_id"].(string)
	if !ok1 || !ok2 {
		t.Fatalf("AppRole answered without role_id or secret_id strings")
	}
	return r, s
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(acrossClusters, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// applyExample creates every object of the example name, with r's
// replacements.
func applyExample(t *testing.T, c client.Client, name string, r *strings.Replacer) {
	t.Helper()
	applyManifests(t, c, r.Replace(readExample(t, name)))
}

// applyManifests creates every object of the multi-document YAML docs.
func applyManifests(t *testing.T, c client.Client, docs string) {
	t.Helper()
	name := "manifests"
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(t.Context(), &u); err != nil {
			t.Fatalf("%s: create %s %s: %v", name, u.GetKind(), u.GetName(), err)
		}
	}
}

// runController starts keymount-controller with --enable-fanout against
// env's API server, with extra flags.
func runController(t *testing.T, env *k8senv.Env, extra ...string) {
	t.Helper()
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	startBinary(t, buildBinary(t), append([]string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + t.TempDir(), "--enable-fanout", "--rotation-poll-interval=0s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, extra...), syncrequest.EnvPodNamespace+"=keymount-system", syncrequest.EnvPodName+"=keymount-controller-0")
}
