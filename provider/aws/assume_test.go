package aws_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/motoserver"
)

// oneRole is a ServiceAccountReader: every service account has one role.
type oneRole string

func (r oneRole) RoleARN(context.Context, string, string) (string, error) { return string(r), nil }

// signers records the access key and the operation of each store request.
type signers struct {
	mu   sync.Mutex
	keys map[string]string // access key -> operations, comma-joined
}

func (s *signers) Do(req *http.Request) (*http.Response, error) {
	_, cred, _ := strings.Cut(req.Header.Get("Authorization"), "Credential=")
	key, _, _ := strings.Cut(cred, "/")
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[string]string{}
	}
	s.keys[key] += req.Header.Get("X-Amz-Target") + ","
	s.mu.Unlock()
	return http.DefaultClient.Do(req)
}

// TestMountAssumeRoleArn: a class of ASCP 3.2 with assumeRoleArn mounts as
// that role: moto_server's STS assumes it with the pod's IRSA credentials,
// and every store call is signed with the assumed role's, still batched.
func TestMountAssumeRoleArn(t *testing.T) {
	endpoint := motoserver.Start(t)
	const target = "arn:aws:iam::210987654321:role/secrets-reader"
	// The secrets live in the target role's account, as in AWS's example
	// (moto keeps accounts apart): the pod's own account does not see them.
	out, err := sts.New(sts.Options{Region: region, BaseEndpoint: awssdk.String(endpoint), Credentials: motoserver.Credentials()}).
		AssumeRole(t.Context(), &sts.AssumeRoleInput{RoleArn: awssdk.String(target), RoleSessionName: awssdk.String("seed")})
	if err != nil {
		t.Fatal(err)
	}
	c := out.Credentials
	owner := credentials.NewStaticCredentialsProvider(*c.AccessKeyId, *c.SecretAccessKey, *c.SessionToken)
	sm := secretsmanager.NewFromConfig(awssdk.Config{Region: region, Credentials: owner, BaseEndpoint: awssdk.String(endpoint)})
	var objects strings.Builder
	for i := range 3 {
		name := fmt.Sprintf("shared/db-%d", i)
		if _, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: awssdk.String(name), SecretString: awssdk.String("v")}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&objects, "- {objectName: %s, objectType: secretsmanager}\n", name)
	}
	tokens, iss := newVerifier(t)
	ids := identity.New(identity.Config{STSEndpoint: endpoint}, oneRole("arn:aws:iam::123456789012:role/app"))
	rec := &signers{}
	p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, nil), tokens, ids, store.New(store.Config{Endpoint: endpoint, HTTPClient: rec}))
	if err != nil {
		t.Fatal(err)
	}
	attrs := shopWeb(t, iss, map[string]string{spec.KeyObjects: objects.String(), spec.KeyAssumeRoleARN: target})
	if _, err := p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644}); err != nil {
		t.Fatal(err)
	}
	if len(rec.keys) != 1 {
		t.Fatalf("store calls signed with %d access keys, want 1: %v", len(rec.keys), rec.keys)
	}
	for key, ops := range rec.keys {
		if ops != "secretsmanager.BatchGetSecretValue," {
			t.Errorf("store calls = %q, want one BatchGetSecretValue for 3 secrets", ops)
		}
		// Who that access key is, as moto sees it.
		who, err := sts.New(sts.Options{Region: region, BaseEndpoint: awssdk.String(endpoint),
			Credentials: awssdk.CredentialsProviderFunc(func(context.Context) (awssdk.Credentials, error) {
				return awssdk.Credentials{AccessKeyID: key, SecretAccessKey: "unused-by-moto"}, nil
			})}).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		if err != nil {
			t.Fatal(err)
		}
		if want := ":assumed-role/secrets-reader/keymount-shop.app"; !strings.HasSuffix(awssdk.ToString(who.Arn), want) {
			t.Errorf("store calls made as %s, want ...%s", awssdk.ToString(who.Arn), want)
		}
	}

	// The same class without assumeRoleArn reads as the pod's own role,
	// in the pod's account: what a provider ignoring the key would do.
	own := shopWeb(t, iss, map[string]string{spec.KeyObjects: objects.String()})
	if _, err := p.Mount(t.Context(), &server.MountRequest{Attributes: own, Permission: 0o644}); server.Code(err) != codes.NotFound {
		t.Errorf("without assumeRoleArn: code %v, want NotFound (err %v)", server.Code(err), err)
	}

	for _, tc := range []struct {
		name  string
		extra map[string]string
		want  string
	}{
		{"an invalid role ARN", map[string]string{spec.KeyAssumeRoleARN: "secrets-reader"}, `assumeRoleArn: "secrets-reader" is not an IAM role ARN`},
		{"a key of no release", map[string]string{"assumeRole": target}, "assumeRole: not known to keymount's AWS provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := shopWeb(t, iss, map[string]string{spec.KeyObjects: objects.String()})
			for k, v := range tc.extra {
				attrs[k] = v
			}
			_, err := p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644})
			if got := server.Code(err); got != codes.InvalidArgument {
				t.Fatalf("code = %v, want InvalidArgument (err %v)", got, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
