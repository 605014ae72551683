package aws_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/kubeclient/kubeclienttest"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/motoserver"
)

const region = "eu-west-1"

// staticIdentity stands in for IRSA: the identity package has its own
// tests against moto's STS; here the point is the wiring.
type staticIdentity struct {
	calls  int
	forgot []string
}

func (s *staticIdentity) For(context.Context, *spec.Spec) (*identity.Identity, error) {
	s.calls++
	return &identity.Identity{Key: "test", Credentials: motoserver.Credentials()}, nil
}

func (s *staticIdentity) Forget(key string) { s.forgot = append(s.forgot, key) }

// newVerifier returns a token verifier of a test issuer, and the issuer.
func newVerifier(t testing.TB) (*satoken.Verifier, *satokentest.Issuer) {
	t.Helper()
	iss := satokentest.New(t, "https://kubernetes.default.svc.cluster.local")
	v, err := satoken.New(satoken.Config{}, iss)
	if err != nil {
		t.Fatal(err)
	}
	return v, iss
}

// shopWeb adds pod shop/web of service account app, and its token, to attrs.
func shopWeb(t testing.TB, iss *satokentest.Issuer, attrs map[string]string) map[string]string {
	t.Helper()
	return podAttrs(t, iss, attrs, "shop", "app", "web", "uid-web")
}

func seed(t *testing.T, endpoint string) {
	t.Helper()
	cfg := awssdk.Config{Region: region, Credentials: motoserver.Credentials(), BaseEndpoint: awssdk.String(endpoint)}
	sm := secretsmanager.NewFromConfig(cfg)
	if _, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{
		Name: awssdk.String("app/db"), SecretString: awssdk.String(`{"username":"app","password":"pw-1"}`),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(t.Context(), &ssm.PutParameterInput{
		Name: awssdk.String("/app/url"), Value: awssdk.String("https://db.internal"), Type: ssmtypes.ParameterTypeString,
	}); err != nil {
		t.Fatal(err)
	}
}

func TestMountAgainstMoto(t *testing.T) {
	endpoint := motoserver.Start(t)
	seed(t, endpoint)
	ids := &staticIdentity{}
	tokens, iss := newVerifier(t)
	p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, nil), tokens, ids, store.New(store.Config{Endpoint: endpoint}))
	if err != nil {
		t.Fatal(err)
	}
	objects := `
- objectName: "app/db"
  objectType: "secretsmanager"
  jmesPath:
    - path: password
      objectAlias: db-password
- objectName: "/app/url"
  objectType: "ssmparameter"
`
	res, err := p.Mount(t.Context(), &server.MountRequest{
		Attributes: shopWeb(t, iss, map[string]string{"objects": objects}),
		Permission: 0o644,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Path] = string(f.Contents)
	}
	want := map[string]string{
		"app_db":      `{"username":"app","password":"pw-1"}`,
		"db-password": "pw-1",
		"_app_url":    "https://db.internal",
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("file %q = %q, want %q (files: %v)", name, got[name], v, keys(got))
		}
	}
	if len(res.Versions) != 2 || ids.calls != 1 {
		t.Errorf("versions = %v, identity calls = %d", res.Versions, ids.calls)
	}
}

// TestMountDataFromAgainstMoto: a class's extract and find objects, parsed
// from its parameters, mount every field of a JSON secret and every secret
// and parameter found, each under its object's alias, with paths the
// provider kit accepts.
func TestMountDataFromAgainstMoto(t *testing.T) {
	endpoint := motoserver.Start(t)
	seed(t, endpoint)
	tokens, iss := newVerifier(t)
	p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, nil), tokens, &staticIdentity{}, store.New(store.Config{Endpoint: endpoint}))
	if err != nil {
		t.Fatal(err)
	}
	objects := `
- objectName: app/db
  objectType: secretsmanager
  objectAlias: db
  extract: {}
- objectType: secretsmanager
  objectAlias: secrets
  find: {path: app/, rewrite: [{regexp: {source: "/", target: "-"}}]}
- objectType: ssmparameter
  objectAlias: params
  find: {path: /app, name: {regexp: url}}
`
	res, err := p.Mount(t.Context(), &server.MountRequest{
		Attributes: shopWeb(t, iss, map[string]string{"objects": objects}),
		Permission: 0o644,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		if err := server.ValidatePath(f.Path); err != nil {
			t.Errorf("file %q: %v", f.Path, err)
		}
		got[f.Path] = string(f.Contents)
	}
	want := map[string]string{
		"db/username":     "app",
		"db/password":     "pw-1",
		"secrets/app-db":  `{"username":"app","password":"pw-1"}`,
		"params/_app_url": "https://db.internal",
	}
	if len(got) != len(want) {
		t.Errorf("files %v, want %v", keys(got), keys(want))
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("file %q = %q, want %q (files: %v)", name, got[name], v, keys(got))
		}
	}
	if len(res.Versions) != 3 {
		t.Errorf("versions = %v, want one per object", res.Versions)
	}
}

// missingARN names a secret moto does not have.
const missingARN = "arn:aws:secretsmanager:" + region + ":123456789012:secret:missing-AbCdEf"

// TestMountErrors: a mount that cannot succeed says why; a missing object
// is named as the class names it, with the region asked.
func TestMountErrors(t *testing.T) {
	endpoint := motoserver.Start(t)
	tokens, iss := newVerifier(t)
	p, err := aws.New(noderegion.New(noderegion.Config{}, nil), tokens, &staticIdentity{}, store.New(store.Config{Endpoint: endpoint}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		attrs map[string]string
		is    error
		want  string
	}{
		{"bad objects", map[string]string{"objects": "- objectName: x\n  objectType: nope\n", "region": region}, server.ErrInvalidParameters, "objectType"},
		{"no region", map[string]string{"objects": "- objectName: x\n  objectType: secretsmanager\n"}, server.ErrFailedPrecondition, "set parameters.region"},
		{"missing secret", map[string]string{"objects": "- objectName: nope\n  objectType: secretsmanager\n", "region": region}, server.ErrNotFound,
			`nope: not found: ResourceNotFoundException (secretsmanager "nope" in region ` + region + `)`},
		{"missing secret by ARN", map[string]string{"objects": "- objectName: " + missingARN + "\n  objectAlias: db\n", "region": region}, server.ErrNotFound,
			`db: not found: ResourceNotFoundException (secretsmanager "` + missingARN + `" in region ` + region + `)`},
		{"missing parameter", map[string]string{"objects": "- objectName: /app/nope\n  objectType: ssmparameter\n", "region": region}, server.ErrNotFound,
			`app_nope: not found: ParameterNotFound: no such parameter, version or label (ssmparameter "/app/nope" in region ` + region + `)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Mount(t.Context(), &server.MountRequest{Attributes: shopWeb(t, iss, tc.attrs), Permission: 0o644})
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.is, tc.want)
			}
		})
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMountRegionFromNode: a class without a region reads the objects in
// the region of the pod's node (its topology.kubernetes.io/region label),
// as the existing provider does; the node's region also checks ARNs.
func TestMountRegionFromNode(t *testing.T) {
	endpoint := motoserver.Start(t)
	seed(t, endpoint)
	kube := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{noderegion.Label: region}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.PodSpec{NodeName: "n1"}},
	)
	tokens, iss := newVerifier(t)
	p, err := aws.New(noderegion.New(noderegion.Config{}, kubeclienttest.Wrap(kube)), tokens, &staticIdentity{}, store.New(store.Config{Endpoint: endpoint}))
	if err != nil {
		t.Fatal(err)
	}
	attrs := shopWeb(t, iss, map[string]string{
		"objects": "- {objectName: app/db, objectType: secretsmanager, jmesPath: [{path: password, objectAlias: db/password}]}",
	})
	res, err := p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Path] = string(f.Contents)
	}
	if got["db_password"] != "pw-1" || got["app_db"] == "" {
		t.Errorf("files %v: want app_db and db_password (the jmesPath alias translated) from %s", keys(got), region)
	}

	attrs["objects"] = "- objectName: arn:aws:secretsmanager:us-east-1:123456789012:secret:x-a1b2c3"
	_, err = p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644})
	if !errors.Is(err, server.ErrInvalidParameters) || !strings.Contains(err.Error(), `region is "`+region+`"`) {
		t.Errorf("ARN in another region than the node's: %v", err)
	}
}

// TestMountForgetsRejectedCredentials: when the store refuses the
// credentials themselves (expired, unknown, or denied), the identity's
// cached credentials are dropped so that the next mount gets new ones;
// other failures keep them.
func TestMountForgetsRejectedCredentials(t *testing.T) {
	tests := []struct {
		code   string
		forget bool
	}{
		{"ExpiredTokenException", true},
		{"UnrecognizedClientException", true},
		{"AccessDeniedException", true},
		{"ResourceNotFoundException", false},
	}
	for _, tc := range tests {
		t.Run(tc.code, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/x-amz-json-1.1")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"__type":%q,"message":"no"}`, tc.code)
			}))
			t.Cleanup(srv.Close)
			ids := &staticIdentity{}
			tokens, iss := newVerifier(t)
			p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, nil), tokens, ids,
				store.New(store.Config{Endpoint: srv.URL, MaxBackoff: time.Millisecond}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Mount(t.Context(), &server.MountRequest{
				Attributes: shopWeb(t, iss, map[string]string{"objects": "- {objectName: app/db, objectType: secretsmanager}"}), Permission: 0o644})
			if err == nil {
				t.Fatal("Mount succeeded against a refusing store")
			}
			if forgot := len(ids.forgot) == 1 && ids.forgot[0] == "test"; forgot != tc.forget {
				t.Errorf("forgot %v after %s, want forgotten: %v", ids.forgot, tc.code, tc.forget)
			}
		})
	}
}
