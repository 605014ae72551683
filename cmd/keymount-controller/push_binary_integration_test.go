//go:build integration && vault

package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/pushsecret"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestBinaryPushesToVault: the keymount-controller binary pushes a
// PushSecret through the keymount-provider-vault binary to a real Vault,
// as the PushSecret's ServiceAccount (Kubernetes auth): the whole Secret
// as the KV secret's fields (ESO's format), marked keymount.io/pushed-by;
// a change of the Secret is the next version; a version someone else
// wrote is kept and reported (PushConflict); deletionPolicy Delete removes
// keymount's version when the PushSecret goes.
func TestBinaryPushesToVault(t *testing.T) {
	env, _, c := startCluster(t)
	v := vaultenv.Start(t, vaultenv.Options{Kube: env})
	v.Policy(t, "app-push", `path "secret/data/app/*" { capabilities = ["create", "update", "read", "delete"] }
path "secret/metadata/app/*" { capabilities = ["read", "update"] }`)
	v.KubernetesRole(t, vaultenv.Role{Name: "app", Namespace: "app", ServiceAccount: "app", Policies: []string{"app-push"}})

	sockDir := sockettest.Dir(t)
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	startBinary(t, goBuild(t, "../keymount-provider-vault", "keymount-provider-vault"), []string{"--provider-dir=" + sockDir, "--kubeconfig=" + kubeconfig})
	startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + sockDir, "--token-request-audience=vault",
		"--rotation-poll-interval=0s", "--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, syncrequest.EnvPodNamespace+"=keymount-system", syncrequest.EnvPodName+"=keymount-controller-0")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("CERT-1"), "tls.key": []byte("KEY-1")}}
	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "vault-push"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "vault", Parameters: map[string]string{"vaultAddress": v.Addr, "roleName": "app"}},
	}
	ps := &pushv1alpha1.PushSecret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "tls"},
		Spec: pushv1alpha1.PushSecretSpec{
			SecretProviderClassName: "vault-push", ServiceAccountName: "app",
			DeletionPolicy: pushv1alpha1.DeletionPolicyDelete,
			Selector:       pushv1alpha1.PushSecretSelector{Secret: pushv1alpha1.PushSecretSecret{Name: "web-tls"}},
			Data: []pushv1alpha1.PushSecretData{{Match: pushv1alpha1.PushSecretMatch{
				RemoteRef: pushv1alpha1.PushSecretRemoteRef{RemoteKey: "secret/data/app/web-tls"}}}},
		},
	}
	create(t, c, secret, class, ps)
	kv := func(want map[string]string) map[string]any {
		t.Helper()
		var md map[string]any
		poll.Until(t, "secret/data/app/web-tls holding "+strings.Join(values(want), ","), func(ctx context.Context) (bool, error) {
			s, err := v.Client.Logical().ReadWithContext(ctx, "secret/data/app/web-tls")
			if err != nil || s == nil {
				return false, err
			}
			fields, _ := s.Data["data"].(map[string]any)
			for k, val := range want {
				if fields[k] != val {
					return false, nil
				}
			}
			md, _ = s.Data["metadata"].(map[string]any)
			return len(fields) == len(want), nil
		})
		return md
	}
	md := kv(map[string]string{"tls.crt": "CERT-1", "tls.key": "KEY-1"})
	custom, _ := md["custom_metadata"].(map[string]any)
	if custom["keymount.io/pushed-by"] != "app/tls" || md["version"] != json.Number("1") {
		t.Errorf("metadata %v: want version 1, pushed-by app/tls", md)
	}
	pushed := readyAs(t, c, pushsecret.ReasonSynced, "")
	if len(pushed.Status.Pushed) != 1 || pushed.Status.Pushed[0].Version != "1" {
		t.Errorf("status.pushed %+v, want secret/data/app/web-tls at version 1", pushed.Status.Pushed)
	}

	secret.Data["tls.crt"] = []byte("CERT-2")
	if err := c.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	if md := kv(map[string]string{"tls.crt": "CERT-2", "tls.key": "KEY-1"}); md["version"] != json.Number("2") {
		t.Errorf("the change is version %v, want 2", md["version"])
	}

	v.PutKVv2(t, "app/web-tls", map[string]any{"tls.crt": "theirs", "tls.key": "theirs"})
	secret.Data["tls.crt"] = []byte("CERT-3")
	if err := c.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	readyAs(t, c, pushsecret.ReasonPushConflict, "secret/data/app/web-tls")
	kv(map[string]string{"tls.crt": "theirs", "tls.key": "theirs"})

	// Annotated to replace it: the Secret's value again; then deleted:
	// keymount's version removed.
	cur := &pushv1alpha1.PushSecret{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(ps), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Annotations = map[string]string{pushv1alpha1.AnnotationOverwrite: "true"}
	if err := c.Patch(t.Context(), cur, patch); err != nil {
		t.Fatal(err)
	}
	kv(map[string]string{"tls.crt": "CERT-3", "tls.key": "KEY-1"})
	readyAs(t, c, pushsecret.ReasonSynced, "")
	if err := c.Delete(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the PushSecret gone and keymount's version deleted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ps), &pushv1alpha1.PushSecret{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		s, err := v.Client.Logical().ReadWithContext(ctx, "secret/data/app/web-tls")
		return s == nil || s.Data["data"] == nil, err
	})
}

// readyAs waits until PushSecret app/tls's Ready condition has reason and
// a message containing msg.
func readyAs(t *testing.T, c client.Client, reason, msg string) *pushv1alpha1.PushSecret {
	t.Helper()
	ps := &pushv1alpha1.PushSecret{}
	poll.Until(t, "PushSecret app/tls "+reason, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "tls"}, ps); err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(ps.Status.Conditions, pushv1alpha1.ConditionReady)
		return cond != nil && cond.Reason == reason && strings.Contains(cond.Message, msg), nil
	})
	return ps
}

func values(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// TestBinaryPushesConvertedPushSecret: an ESO PushSecret converted by
// keymount convert (the corpus case push-vault-kv2, its golden output
// applied unchanged but for Vault's address) is pushed by the binaries to
// a real Vault: the whole Secret as the KV secret's fields, as the store's
// ServiceAccount.
func TestBinaryPushesConvertedPushSecret(t *testing.T) {
	env, cs, c := startCluster(t)
	v := vaultenv.Start(t, vaultenv.Options{Kube: env})
	v.Policy(t, "web-push", `path "secret/data/web/*" { capabilities = ["create", "update", "read"] }
path "secret/metadata/web/*" { capabilities = ["read", "update"] }`)
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("web").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v.KubernetesRole(t, vaultenv.Role{Name: "web-writer", Namespace: "web", ServiceAccount: "app", Policies: []string{"web-push"}})
	sockDir := sockettest.Dir(t)
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	startBinary(t, goBuild(t, "../keymount-provider-vault", "keymount-provider-vault"), []string{"--provider-dir=" + sockDir, "--kubeconfig=" + kubeconfig})
	startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + sockDir, "--token-request-audience=vault",
		"--rotation-poll-interval=0s", "--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, syncrequest.EnvPodNamespace+"=keymount-system", syncrequest.EnvPodName+"=keymount-controller-0")

	create(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}})
	golden, err := os.ReadFile("../keymount/internal/convert/testdata/corpus/push-vault-kv2.golden")
	if err != nil {
		t.Fatal(err)
	}
	applyManifests(t, c, strings.ReplaceAll(string(golden), "https://vault.example.com:8200", v.Addr))
	poll.Until(t, "secret/data/web/tls holding the Secret's keys", func(ctx context.Context) (bool, error) {
		s, err := v.Client.Logical().ReadWithContext(ctx, "secret/data/web/tls")
		if err != nil || s == nil {
			return false, err
		}
		fields, _ := s.Data["data"].(map[string]any)
		return fields["tls.crt"] == "CERT" && fields["tls.key"] == "KEY" && len(fields) == 2, nil
	})
}
