package node_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/nodeenv"
)

const (
	awsRegion  = "eu-west-1"
	awsRoleARN = "arn:aws:iam::123456789012:role/app"
	// awsProviderUser is the AWS provider's identity at the API server.
	awsProviderUser = "keymount-node-provider-aws"
)

// awsEnv keeps the AWS provider away from any real AWS endpoint and any
// credential of the machine.
func awsEnv() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + motoserver.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + motoserver.SecretAccessKey,
		"AWS_REGION=" + awsRegion,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
		"NO_PROXY=*",
	}
}

// TestAWSProviderInRealPod: keymount-provider-aws, against moto_server on
// 127.0.0.1, mounts a Secrets Manager secret into a real pod whose service
// account carries an IRSA role: kubelet mints the sts.amazonaws.com token,
// the provider exchanges it with (moto's) STS, and the container prints
// the secret.
func TestAWSProviderInRealPod(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	ctx := t.Context()

	endpoint := motoserver.StartLogging(t, n.LogPath("moto_server"))
	sm := secretsmanager.New(secretsmanager.Options{Region: awsRegion, BaseEndpoint: aws.String(endpoint),
		Credentials: motoserver.Credentials()})
	value := "aws-" + randomHex(8)
	forbidden.add(value, "the secret stored in moto")
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(ns + "/db"), SecretString: aws.String(value)}); err != nil {
		t.Fatalf("moto: CreateSecret: %v", err)
	}

	// The provider reads service accounts (their role annotation) and proves
	// every token: the issuer's discovery and keys, TokenReview as fallback
	// (deploy/providers/aws/rbac.yaml).
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: awsProviderUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get"}},
			{NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}, Verbs: []string{"get"}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: awsProviderUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: awsProviderUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: awsProviderUser}},
	}
	if err := n.Ctrl.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := n.Ctrl.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _ := n.Env.KubeconfigFor(t, awsProviderUser, nil)
	provider := n.Run(t, "keymount-provider-aws", "keymount-provider-aws", awsEnv(),
		"--provider-dir="+n.ProviderDir, "--name=aws", "--region="+awsRegion, "--kubeconfig="+kubeconfig,
		"--aws-endpoint="+endpoint, "--sts-endpoint="+endpoint, "-v=10")
	t.Cleanup(func() { provider.Stop(t) })
	n.WaitSocket(t, provider, filepath.Join(n.ProviderDir, "aws.sock"))

	sa, err := n.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa.Annotations = map[string]string{"eks.amazonaws.com/role-arn": awsRoleARN}
	if _, err := n.Kube.CoreV1().ServiceAccounts(ns).Update(ctx, sa, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-db"},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider: "aws",
			Parameters: map[string]string{"objects": fmt.Sprintf(`
- objectName: %s/db
  objectType: secretsmanager
  objectAlias: db
`, ns)},
		},
	}
	if err := n.Ctrl.Create(ctx, spc); err != nil {
		t.Fatal(err)
	}
	pod := createPod(t, n, ns, "app", "aws-db", "show", "-follow", mountPath+"/db")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the secret from moto", hasContent("db", value))
}
