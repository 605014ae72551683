//go:build vault

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/tests/poll"
	"github.com/keymount/keymount/tests/vaultenv"
)

const (
	// vaultProviderUser is the identity of the Vault provider at the API
	// server, with the API access of deploy/providers/vault: proving
	// tokens only.
	vaultProviderUser = "keymount-e2e-provider-vault"
	// vaultPKIRole issues the test certificates, each with a lease.
	vaultPKIRole = "e2e"
)

// vaultPolicy is what the test role may do; revokeOnUnpublish needs
// update on sys/leases/revoke.
const vaultPolicy = `
path "secret/data/*" { capabilities = ["read"] }
path "secret/metadata/*" { capabilities = ["read"] }
path "pki/issue/*" { capabilities = ["create", "update"] }
path "sys/leases/revoke" { capabilities = ["update"] }
`

// TestVaultProvider mounts a class written for vault-csi-provider
// (provider: vault) through the driver binary and the real
// keymount-provider-vault, against a real Vault whose Kubernetes auth
// reviews the tokens the harness minted as kubelet does: a KV v2 secret
// and a PKI certificate. A republish refreshes the volume without issuing
// another certificate or reading the unchanged secret again; the unpublish
// of a class with revokeOnUnpublish revokes the certificate at once,
// through keymount's provider extension (the provider's --volume-idle is
// far away), and the identity's login with it.
func TestVaultProvider(t *testing.T) {
	n := startNode(t, nodeOptions{})
	s := n.s
	ctx := t.Context()
	v := vaultenv.Start(t, vaultenv.Options{Kube: s.env})
	v.Policy(t, "e2e-app", vaultPolicy)
	v.PKIRole(t, vaultPKIRole, time.Hour, true)
	runVaultProvider(t, n, v)

	ns := n.newNamespace(t)
	v.KubernetesRole(t, vaultenv.Role{Name: "app-" + ns, Namespace: ns, ServiceAccount: serviceAccount,
		Policies: []string{"e2e-app"}, Audience: tokenAudience})
	password := "vault-pw-" + randomHex(8)
	n.forbid(password, "the password stored in Vault")
	v.PutKVv2(t, ns+"/db", map[string]any{"password": password})
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault-app"},
		Spec: secretsstorev1.SecretProviderClassSpec{Provider: "vault", Parameters: map[string]string{
			"roleName": "app-" + ns, "audience": tokenAudience, "revokeOnUnpublish": "true",
			"objects": fmt.Sprintf(`
- {objectName: password, secretPath: secret/data/%s/db, secretKey: password}
- {objectName: serial, secretPath: pki/issue/%s, method: PUT, secretArgs: {common_name: app.example.com}, secretKey: serial_number}
- {objectName: tls.crt, secretPath: pki/issue/%s, method: PUT, secretArgs: {common_name: app.example.com}, secretKey: certificate}
`, ns, vaultPKIRole, vaultPKIRole),
		}},
	}
	if err := s.ctrl.Create(ctx, spc); err != nil {
		t.Fatalf("create SecretProviderClass: %v", err)
	}
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: spc.Name})
	target := n.targetPath(pod, "secrets")
	issue, kvRead := "pki/issue/"+vaultPKIRole, "secret/data/"+ns+"/db"

	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, target, "password"); got != password {
		t.Errorf("file password = %q, want the password stored in Vault", got)
	}
	serial := readFile(t, target, "serial")
	cert := readFile(t, target, "tls.crt")
	if serial == "" || cert == "" {
		t.Fatalf("serial %q, certificate of %d bytes: want both from one PKI issue", serial, len(cert))
	}
	audit := v.Audit(t)
	if got := audit.Count("update", issue); got != 1 {
		t.Errorf("Vault issued %d certificates for the first publish (two files of one request), want 1", got)
	}
	logins, reads := audit.Count("update", "auth/kubernetes/login"), audit.Count("read", kvRead)

	// kubelet's republish: the driver refreshes (--rotation-poll-interval=0s).
	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, target, "serial"); got != serial {
		t.Errorf("the republish changed the certificate: serial %q, want %q", got, serial)
	}
	audit = v.Audit(t)
	if got := audit.Count("update", issue); got != 1 {
		t.Errorf("Vault issued %d certificates after a republish, want the first one only", got)
	}
	if d := audit.Count("read", kvRead) - reads; d != 0 {
		t.Errorf("the republish read the unchanged KV secret %d times in full, want 0 (a metadata read)", d)
	}
	if d := audit.Count("update", "auth/kubernetes/login") - logins; d != 0 {
		t.Errorf("the republish logged in %d more times, want 0", d)
	}
	if v.CertificateRevoked(t, serial) {
		t.Fatal("the certificate is revoked while mounted")
	}

	n.mustUnpublish(t, pod, "secrets")
	poll.Until(t, "the unpublished volume's certificate to be revoked", func(context.Context) (bool, error) {
		return v.CertificateRevoked(t, serial), nil
	})
	poll.Until(t, "the identity's login to be revoked with its last volume", func(context.Context) (bool, error) {
		return v.Audit(t).Count("update", "auth/token/revoke-self") == 1, nil
	})
	n.waitForSeries(t, `keymount_provider_unpublish_calls_total{code="OK",provider="vault"}`, 1)
}

// TestVaultSecretSync: the keymount-controller binary, as its
// ServiceAccount with the RBAC of deploy/components/controller and
// controller-vault as shipped, syncs a SecretSync of a class written for
// vault-csi-provider through a keymount-provider-vault sidecar (its own
// socket directory and the controller's credentials, as
// components/controller-vault runs it): the Secret holds the KV v2 value,
// a new version reaches it on a refresh, and every refresh uses the one
// login of the SecretSync's identity.
func TestVaultSecretSync(t *testing.T) {
	n := startNode(t, nodeOptions{})
	s := n.s
	ctx := t.Context()
	v := vaultenv.Start(t, vaultenv.Options{Kube: s.env})
	v.Policy(t, "e2e-sync", vaultPolicy)
	ns := n.newNamespace(t)
	// The controller requests tokens of the audience vault, the class's
	// default.
	v.KubernetesRole(t, vaultenv.Role{Name: "sync-" + ns, Namespace: ns, ServiceAccount: serviceAccount, Policies: []string{"e2e-sync"}})
	first, second := "sync-pw1-"+randomHex(8), "sync-pw2-"+randomHex(8)
	n.forbid(first, "the first password stored in Vault")
	n.forbid(second, "the second password stored in Vault")
	v.PutKVv2(t, ns+"/sync", map[string]any{"password": first})

	applyShipped(t, s, "deploy/components/controller/rbac.yaml", "deploy/components/controller-vault/rbac.yaml")
	kubeconfig, _ := s.env.KubeconfigFor(t, controllerUser, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"})
	sockets := filepath.Join(n.dir, "controller-providers")
	if err := os.MkdirAll(sockets, 0o750); err != nil {
		t.Fatal(err)
	}
	startVaultProvider(t, n, v, sockets, kubeconfig, "controller-provider-vault.log")
	runVaultController(t, n, sockets, kubeconfig)

	for _, o := range []client.Object{
		&secretsstorev1.SecretProviderClass{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault-sync"},
			Spec: secretsstorev1.SecretProviderClassSpec{Provider: "vault", Parameters: map[string]string{
				"roleName": "sync-" + ns, "objects": "- {objectName: password, secretPath: secret/data/" + ns + "/sync, secretKey: password}",
			}},
		},
		asUnstructured(t, &ss1.SecretSync{
			TypeMeta:   metav1.TypeMeta{APIVersion: ss1.SchemeGroupVersion.String(), Kind: "SecretSync"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: ss1.SecretSyncSpec{SecretProviderClassName: "vault-sync", ServiceAccountName: serviceAccount, SecretObject: ss1.SecretObject{
				Type: "Opaque", Data: []ss1.SecretObjectData{{SourcePath: "password", TargetKey: "password"}},
			}},
		}),
	} {
		if err := s.ctrl.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	waitForSecretValue := func(want, what string) {
		t.Helper()
		poll.Until(t, what, func(ctx context.Context) (bool, error) {
			sec, err := s.kube.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && string(sec.Data["password"]) == want, err
		})
	}
	waitForSecretValue(first, "the Secret of the SecretSync to hold the password from Vault")
	v.PutKVv2(t, ns+"/sync", map[string]any{"password": second})
	waitForSecretValue(second, "the new KV version to reach the Secret")
	if got := v.Audit(t).Count("update", "auth/kubernetes/login"); got != 1 {
		t.Errorf("%d Kubernetes logins for one SecretSync and its refreshes, want 1", got)
	}
}

// runVaultController runs keymount-controller with the Vault provider's
// socket directory, requesting tokens of the audience vault, refreshing
// every second, until the test ends.
func runVaultController(t *testing.T, n *node, sockets, kubeconfig string) {
	t.Helper()
	logPath := filepath.Join(filepath.Dir(n.driverLog), "controller.log")
	metrics, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	health, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), syncrequest.EnvPodNamespace+"=kube-system", syncrequest.EnvPodName+"=keymount-controller-0")
	p, err := startEnvProcess("keymount-controller", logPath, buildCommand(t, n.s.repo, "keymount-controller"), env,
		"--kubeconfig="+kubeconfig, "--provider-volume="+sockets, "--token-request-audience=vault", "--rotation-poll-interval=1s",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metrics), "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(health), logVerbosity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("stopping keymount-controller: %v", err)
		}
		n.checkLog(t, logPath)
		if t.Failed() {
			t.Logf("last lines of the controller log:\n%s", tail(logPath, logTailLines))
		}
	})
}

// asUnstructured converts obj (its TypeMeta set) for the suite's client,
// whose scheme knows only Kubernetes's and secrets-store's types.
func asUnstructured(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// applyShipped creates every object of the repository's YAML files, as
// shipped, and deletes them when the test ends.
func applyShipped(t *testing.T, s *suite, files ...string) {
	t.Helper()
	var created []*unstructured.Unstructured
	t.Cleanup(func() {
		for _, u := range slices.Backward(created) {
			if err := s.ctrl.Delete(context.WithoutCancel(t.Context()), u); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	})
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(s.repo, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			createObject(t, s.ctrl, u)
			created = append(created, u)
		}
	}
}

// runVaultProvider starts keymount-provider-vault for the node's driver,
// against v, with --volume-idle far away: only the driver's unpublish call
// lets go of a volume.
func runVaultProvider(t *testing.T, n *node, v *vaultenv.Vault) {
	t.Helper()
	startVaultProvider(t, n, v, n.providerDir, providerKubeconfig(t, n.s, vaultProviderUser), "provider-vault.log")
}

// startVaultProvider starts keymount-provider-vault serving dir/vault.sock,
// against v, with the API credentials of kubeconfig and its log in the
// node's log directory; it is stopped and its log checked when the test
// ends.
func startVaultProvider(t *testing.T, n *node, v *vaultenv.Vault, dir, kubeconfig, logName string) {
	t.Helper()
	logPath := filepath.Join(filepath.Dir(n.driverLog), logName)
	bin := buildCommand(t, n.s.repo, "keymount-provider-vault")
	p, err := startProcess("keymount-provider-vault", logPath, bin, "--provider-dir="+dir,
		"--vault-addr="+v.Addr, "--kubeconfig="+kubeconfig, "--volume-idle=1000h", logVerbosity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("stopping keymount-provider-vault: %v", err)
		}
		n.checkLog(t, logPath)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", logName, tail(logPath, logTailLines))
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	if err := waitForSocket(ctx, filepath.Join(dir, "vault.sock"), p); err != nil {
		t.Fatalf("keymount-provider-vault did not start: %v\n%s", err, tail(logPath, logTailLines))
	}
}
