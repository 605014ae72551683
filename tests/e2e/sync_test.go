package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// TestSyncSecrets mirrors one volume into an Opaque Secret and a
// kubernetes.io/tls Secret split from one PEM object.
func TestSyncSecrets(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	password := []byte("pw-" + randomHex(8))
	certPEM, keyPEM, cert, key := newCertificate(t, "web.example")
	n.writeObject(t, "db/password", password)
	bundle := append(slices.Clone(certPEM), keyPEM...)
	n.writeObject(t, "tls/web.pem", bundle)
	spc := n.createClass(t, ns, "web", "local",
		[]object{{name: "db/password", alias: "password"}, {name: "tls/web.pem", alias: "web.pem"}},
		&secretsstorev1.SecretObject{
			SecretName:  "db",
			Type:        string(corev1.SecretTypeOpaque),
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"team.example/owner": "payments"},
			Data:        []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}},
		},
		&secretsstorev1.SecretObject{
			SecretName: "web-tls",
			Type:       string(corev1.SecretTypeTLS),
			Data: []*secretsstorev1.SecretObjectData{
				{ObjectName: "web.pem", Key: corev1.TLSCertKey},
				{ObjectName: "web.pem", Key: corev1.TLSPrivateKeyKey},
			},
		})
	pod := n.createPod(t, ns, "web", secretsVolume{name: "secrets", class: "web"})
	n.mustPublish(t, pod, "secrets")

	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue, objects: map[string][]byte{
		"db/password": password, "tls/web.pem": bundle,
	}})

	db := n.s.waitForSecret(t, ns, "db", syncedMeta("web", pod), hasData(map[string][]byte{"password": password}))
	if db.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret db type = %q, want Opaque", db.Type)
	}
	if db.Labels["app"] != "web" || db.Annotations["team.example/owner"] != "payments" {
		t.Errorf("Secret db lacks the class's labels and annotations: %v, %v", db.Labels, db.Annotations)
	}

	tlsSecret := n.s.waitForSecret(t, ns, "web-tls", syncedMeta("web", pod))
	if tlsSecret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret web-tls type = %q, want %q", tlsSecret.Type, corev1.SecretTypeTLS)
	}
	checkTLSPair(t, tlsSecret, cert, key)

	n.mustUnpublish(t, pod, "secrets")
}

// syncedMeta accepts a Secret with what keymount puts on every Secret it
// syncs for class, owned by exactly the given pods (which have no owners of
// their own), never as controller.
func syncedMeta(class string, owners ...*corev1.Pod) secretCheck {
	return func(s *corev1.Secret) error {
		var errs []error
		if s.Labels[managedLabel] != "true" {
			errs = append(errs, fmt.Errorf("no label %s=true: %v", managedLabel, s.Labels))
		}
		if s.Annotations[classAnnotation] != class {
			errs = append(errs, fmt.Errorf("annotation %s = %q, want %q", classAnnotation, s.Annotations[classAnnotation], class))
		}
		if got, want := ownerUIDs(s.OwnerReferences), uids(owners...); !slices.Equal(got, want) || len(s.OwnerReferences) != len(want) {
			errs = append(errs, fmt.Errorf("owned by %v, want pods %v", s.OwnerReferences, want))
		}
		for _, r := range s.OwnerReferences {
			if r.Controller != nil && *r.Controller {
				errs = append(errs, fmt.Errorf("owner %s is a controller reference; pods share the Secret", r.Name))
			}
		}
		return errors.Join(errs...)
	}
}

// newCertificate returns a self-signed certificate and its PKCS#8 key, as
// PEM and parsed.
func newCertificate(t *testing.T, host string) (certPEM, keyPEM []byte, cert *x509.Certificate, key crypto.Signer) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	return certPEM, keyPEM, cert, k
}

// checkTLSPair checks that tls.crt holds exactly the certificate and
// tls.key a private key of the same public key, encoded as the upstream
// driver encodes it, each parsing on its own.
func checkTLSPair(t *testing.T, s *corev1.Secret, wantCert *x509.Certificate, wantKey crypto.Signer) {
	t.Helper()
	crt, rest := pem.Decode(s.Data[corev1.TLSCertKey])
	if crt == nil || crt.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("Secret %s %s is not one PEM certificate", s.Name, corev1.TLSCertKey)
	}
	cert, err := x509.ParseCertificate(crt.Bytes)
	if err != nil {
		t.Fatalf("Secret %s %s: %v", s.Name, corev1.TLSCertKey, err)
	}
	if !cert.Equal(wantCert) {
		t.Errorf("Secret %s %s is not the served certificate (subject %s)", s.Name, corev1.TLSCertKey, cert.Subject)
	}
	kb, rest := pem.Decode(s.Data[corev1.TLSPrivateKeyKey])
	if kb == nil || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("Secret %s %s is not one PEM block", s.Name, corev1.TLSPrivateKeyKey)
	}
	// The upstream driver writes an EC key as SEC 1, an RSA key as PKCS#1.
	var key any
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	default:
		t.Fatalf("Secret %s %s is a %q block, want the key as the upstream driver encodes it", s.Name, corev1.TLSPrivateKeyKey, kb.Type)
	}
	if err != nil {
		t.Fatalf("Secret %s %s does not parse: %v", s.Name, corev1.TLSPrivateKeyKey, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok || !publicKeysEqual(wantKey.Public(), signer.Public()) {
		t.Errorf("Secret %s %s is not the key of the certificate", s.Name, corev1.TLSPrivateKeyKey)
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// TestSyncRefusesUnmanagedSecret names an existing Secret that keymount did
// not create in secretObjects: the volume mounts, the Secret is left as it
// was, and the refusal shows in the SecretsSynced condition and a Warning
// event.
func TestSyncRefusesUnmanagedSecret(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	theirs, err := n.s.kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		StringData: map[string]string{"token": "someone-else-" + randomHex(8)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("ours-" + randomHex(8))
	n.writeObject(t, "token", content)
	spc := n.createClass(t, ns, "grabby", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "taken", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "grabby"})
	n.mustPublish(t, pod, "secrets")

	if got := readFile(t, n.targetPath(pod, "secrets"), "token"); got != string(content) {
		t.Errorf("token = %q, want %q: a sync refusal must not fail the mount", got, content)
	}
	st := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionFalse,
		objects: map[string][]byte{"token": content}})
	if c := condition(st, secretsstorev1.ConditionSecretsSynced); c == nil || c.Reason != "SecretNotManaged" || !strings.Contains(c.Message, "taken") {
		t.Errorf("condition SecretsSynced = %+v, want reason SecretNotManaged naming the Secret", c)
	}
	n.s.waitForEvent(t, pod, corev1.EventTypeWarning, "SecretSyncFailed", `"taken"`)
	// The driver writes the pod status after the sync: the refusal above
	// is its last word on the Secret.
	if got := n.s.secret(t, ns, "taken"); got == nil || got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("keymount wrote a Secret it did not create: resourceVersion %s, was %s", rvOf(got), theirs.ResourceVersion)
	}
	n.mustUnpublish(t, pod, "secrets")
}

// TestSyncedSecretOwnedByReplicaSet: the Secret of a ReplicaSet's pod is
// owned by the ReplicaSet, as the upstream driver does it, so it outlives
// the pod (a Deployment scaled to zero keeps it) and goes with the
// ReplicaSet.
func TestSyncedSecretOwnedByReplicaSet(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	token := []byte("rs-" + randomHex(8))
	n.writeObject(t, "token", token)
	n.createClass(t, ns, "web", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "web", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	labels := map[string]string{"app": "web"}
	rs, err := n.s.kube.AppsV1().ReplicaSets(ns).Create(t.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(0)), // no ReplicaSet controller runs here: the test makes the pod
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: neverRuns}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := n.createPod(t, ns, "web-5d8f-x", secretsVolume{name: "secrets", class: "web"})
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true),
	}}
	if pod, err = n.s.kube.CoreV1().Pods(ns).Update(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.mustPublish(t, pod, "secrets")

	ownedByRS := func(s *corev1.Secret) error {
		want := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}}
		if diff := cmp.Diff(want, s.OwnerReferences); diff != "" {
			return fmt.Errorf("owners (-want +got):\n%s", diff)
		}
		return nil
	}
	n.s.waitForSecret(t, ns, "web", ownedByRS, hasData(map[string][]byte{"token": token}))

	// The ReplicaSet is scaled to zero: its pod goes, the Secret stays. A
	// ConfigMap the pod owns tells when the garbage collector is done with
	// the pod.
	probe, err := n.s.kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "gc-probe", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.deletePod(t, pod, "secrets")
	poll.Until(t, "the garbage collector to handle the pod's deletion", func(ctx context.Context) (bool, error) {
		_, err := n.s.kube.CoreV1().ConfigMaps(ns).Get(ctx, probe.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := ownedByRS(n.s.secret(t, ns, "web")); err != nil {
		t.Errorf("Secret web after its pod went: %v", err)
	}

	if err := n.s.kube.AppsV1().ReplicaSets(ns).Delete(t.Context(), rs.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the garbage collector to delete Secret web with its ReplicaSet", func(context.Context) (bool, error) {
		return n.s.secret(t, ns, "web") == nil, nil
	})
}

// TestFirstPublishWritesMissingSecretFirst: on a first publish whose class
// syncs a Secret that does not exist yet, the Secret is written before
// NodePublishVolume returns, as kubelet then starts the containers: one
// reading it through env or envFrom would otherwise fail with
// CreateContainerConfigError. Read live, right after the call, no waiting.
func TestFirstPublishWritesMissingSecretFirst(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	token := []byte("tok-" + randomHex(8))
	n.writeObject(t, "api/token", token)
	n.createClass(t, ns, "api", "local", []object{{name: "api/token", alias: "token"}},
		&secretsstorev1.SecretObject{
			SecretName: "api-env",
			Type:       string(corev1.SecretTypeOpaque),
			Data:       []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "TOKEN"}},
		})
	pod := n.createPod(t, ns, "api", secretsVolume{name: "secrets", class: "api"})
	n.mustPublish(t, pod, "secrets")

	var s corev1.Secret
	if err := n.s.ctrl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "api-env"}, &s); err != nil {
		t.Fatalf("right after the first NodePublishVolume returned, the synced Secret: %v", err)
	}
	if !bytes.Equal(s.Data["TOKEN"], token) {
		t.Errorf("the synced Secret holds %d bytes under TOKEN, not the mounted value", len(s.Data["TOKEN"]))
	}
	n.mustUnpublish(t, pod, "secrets")
}
