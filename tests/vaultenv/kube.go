package vaultenv

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/k8senv"
)

// reviewerNamespace and reviewer name the service account whose token Vault
// reviews other tokens with.
const (
	reviewerNamespace = "vault-system"
	reviewer          = "vault-token-reviewer"
)

// Role is a Vault role of both the Kubernetes and the JWT auth method for one
// service account.
type Role struct {
	Name           string
	Namespace      string
	ServiceAccount string
	Policies       []string
	// Audience the token must carry (default "vault").
	Audience string
	// TTL and MaxTTL of the login token (defaults 1h and 24h).
	TTL, MaxTTL time.Duration
}

// setupKube enables Kubernetes auth (token reviewer: a TokenRequest token of
// a service account bound to system:auth-delegator) and JWT auth (the API
// server's service account issuer keys as validation keys).
func (v *Vault) setupKube(t testing.TB, env *k8senv.Env) {
	t.Helper()
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	mustCreate(t, func() error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reviewerNamespace}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := kube.CoreV1().ServiceAccounts(reviewerNamespace).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: reviewer}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: reviewer},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: reviewerNamespace, Name: reviewer}},
		}, metav1.CreateOptions{})
		return err
	})
	expiry := int64((24 * time.Hour).Seconds())
	tr, err := kube.CoreV1().ServiceAccounts(reviewerNamespace).CreateToken(ctx, reviewer, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of the Vault token reviewer: %v", err)
	}
	v.Write(t, "sys/auth/"+KubernetesMount, map[string]any{"type": "kubernetes"})
	v.Write(t, "auth/"+KubernetesMount+"/config", map[string]any{
		"kubernetes_host": env.Config.Host, "kubernetes_ca_cert": string(env.Config.CAData),
		"token_reviewer_jwt": tr.Status.Token, "disable_local_ca_jwt": true,
	})

	issuer, keys := issuerKeys(t, kube)
	v.Write(t, "sys/auth/"+JWTMount, map[string]any{"type": "jwt"})
	v.Write(t, "auth/"+JWTMount+"/config", map[string]any{"bound_issuer": issuer, "jwt_validation_pubkeys": keys})
}

// issuerKeys reads the API server's service account issuer and its public
// keys, PEM-encoded.
func issuerKeys(t testing.TB, kube kubernetes.Interface) (string, []string) {
	t.Helper()
	ctx := t.Context()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the service account issuer: %v", err)
	}
	var disc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &disc); err != nil || disc.Issuer == "" {
		t.Fatalf("service account issuer discovery: %v %s", err, raw)
	}
	raw, err = kube.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the service account issuer keys: %v", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("service account issuer keys: %v %s", err, raw)
	}
	keys := make([]string, 0, len(set.Keys))
	for _, k := range set.Keys {
		der, err := x509.MarshalPKIXPublicKey(k.Key)
		if err != nil {
			t.Fatalf("issuer key %s: %v", k.KeyID, err)
		}
		keys = append(keys, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	}
	return disc.Issuer, keys
}

// KubernetesRole adds r to both auth methods.
func (v *Vault) KubernetesRole(t testing.TB, r Role) {
	t.Helper()
	if r.Audience == "" {
		r.Audience = "vault"
	}
	if r.TTL == 0 {
		r.TTL = time.Hour
	}
	if r.MaxTTL == 0 {
		r.MaxTTL = 24 * time.Hour
	}
	policies := strings.Join(r.Policies, ",")
	v.Write(t, "auth/"+KubernetesMount+"/role/"+r.Name, map[string]any{
		"bound_service_account_names": r.ServiceAccount, "bound_service_account_namespaces": r.Namespace,
		"audience": r.Audience, "token_policies": policies, "token_ttl": ttl(r.TTL), "token_max_ttl": ttl(r.MaxTTL),
	})
	v.Write(t, "auth/"+JWTMount+"/role/"+r.Name, map[string]any{
		"role_type": "jwt", "user_claim": "sub", "bound_audiences": r.Audience,
		"bound_subject":  "system:serviceaccount:" + r.Namespace + ":" + r.ServiceAccount,
		"token_policies": policies, "token_ttl": ttl(r.TTL), "token_max_ttl": ttl(r.MaxTTL),
	})
}

// mustCreate runs create and fails the test unless it succeeded or the
// object exists.
func mustCreate(t testing.TB, create func() error) {
	t.Helper()
	if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
