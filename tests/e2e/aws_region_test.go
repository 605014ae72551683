package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/motoserver"
)

// regionLabel is the node label a class without a region takes its region
// from.
const regionLabel = "topology.kubernetes.io/region"

// TestAWSProviderNodeRegion: keymount-provider-aws started as the existing
// provider's manifests start it (its flags --provider-volume,
// --driver-writes-secrets, --qps, --burst, --eks-addon-version and
// --pod-identity-http-timeout; no --region, no AWS_REGION, no NODE_NAME)
// mounts a class without a region from the region of the pod's node, read
// through the real API server with the provider's RBAC (get pods, nodes).
// A node without the label fails the first publish with FailedPrecondition
// naming the fix, and is read again once labelled. The jmesPath alias
// "db/password" is the file db_password, as the existing provider names it,
// and the object's keys are read as its decoder reads them: in any case,
// unknown keys ignored.
func TestAWSProviderNodeRegion(t *testing.T) {
	n := startNode(t, nodeOptions{})
	s := n.s
	ctx := t.Context()
	logDir := filepath.Dir(n.driverLog)

	ensureTokenAudience(t, s, awsSTSAudience)
	kubeconfig := awsProviderKubeconfig(t, s)
	endpoint := motoserver.StartLogging(t, filepath.Join(logDir, "moto.log"))

	password := "pw-" + randomHex(8)
	secret := dbJSON(t, password)
	sm := secretsmanager.New(secretsmanager.Options{Region: awsRegion, BaseEndpoint: aws.String(endpoint),
		Credentials: motoserver.Credentials()})
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("app/db"), SecretString: aws.String(secret)}); err != nil {
		t.Fatalf("moto: CreateSecret: %v", err)
	}
	n.forbid(password, "the password stored in moto")
	n.forbid(secret, "the secret string stored in moto")

	// The node object, as kubelet registers it, before the cloud
	// controller has labelled it.
	nodes := s.kube.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", n.name, err)
	}
	t.Cleanup(func() {
		if err := nodes.Delete(context.WithoutCancel(ctx), n.name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete node %s: %v", n.name, err)
		}
	})

	// The existing AWS provider's DaemonSet flags, under their names.
	runAWSProvider(t, n, logDir, kubeconfig, endpoint, "",
		"--provider-volume="+n.providerDir, "--driver-writes-secrets=false", "--qps=5", "--burst=10",
		"--eks-addon-version=v1.0.0-eksbuild.1", "--pod-identity-http-timeout=100ms")
	ns := s.irsaNamespace(t, n)
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-noregion"},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider: "aws",
			// objectTemplate, which keymount does not implement, is refused
			// unless the class lists it as safe to ignore.
			Parameters: map[string]string{"keymount.io/ignore-parameters": "objectTemplate", "objects": `
- ObjectName: app/db
  objecttype: secretsmanager
  objectTemplate: ignored-as-listed
  jmesPath:
  - Path: password
    ObjectAlias: db/password
`},
		},
	}
	if err := s.ctrl.Create(ctx, spc); err != nil {
		t.Fatalf("create SecretProviderClass: %v", err)
	}
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: spc.Name})

	err := n.publish(t, pod, "secrets")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "has no "+regionLabel+" label") ||
		!strings.Contains(err.Error(), "parameters.region") {
		t.Fatalf("publish on a node without a region label: %v; want FailedPrecondition naming the label and parameters.region", err)
	}
	n.checkNothingMounted(t, pod, "secrets")

	node, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels = map[string]string{regionLabel: awsRegion}
	if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label node %s: %v", n.name, err)
	}
	n.mustPublish(t, pod, "secrets")
	checkFiles(t, n.targetPath(pod, "secrets"), map[string]string{"app_db": secret, "db_password": password})
	n.mustUnpublish(t, pod, "secrets")
}
