package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/motoserver"
)

const (
	// awsRegion is the region of the provider and of the seeded objects.
	awsRegion = "eu-west-1"
	// awsSTSAudience is the audience of the token IRSA exchanges.
	awsSTSAudience = "sts.amazonaws.com"
	// awsRoleARN is the IAM role the pod's service account is annotated with.
	awsRoleARN = "arn:aws:iam::123456789012:role/app"
	// awsProviderUser is the identity of the AWS provider at the API server.
	awsProviderUser = "keymount-e2e-provider-aws"
	// awsFreshness is the provider's --freshness.
	awsFreshness = time.Second
)

// TestAWSProvider mounts a class of provider aws through the driver and the
// real keymount-provider-aws, against moto_server, with an IRSA identity:
// a Secrets Manager secret (plus a JMESPath file synced into a Secret) and
// an SSM parameter. A new secret value in the store reaches the file, the
// pod status and the Secret on the next republish past the provider's
// freshness.
func TestAWSProvider(t *testing.T) {
	n := startNode(t, nodeOptions{})
	s := n.s
	ctx := t.Context()
	logDir := filepath.Dir(n.driverLog)

	ensureTokenAudience(t, s, awsSTSAudience)
	kubeconfig := awsProviderKubeconfig(t, s)

	endpoint := motoserver.StartLogging(t, filepath.Join(logDir, "moto.log"))
	sm := secretsmanager.New(secretsmanager.Options{Region: awsRegion, BaseEndpoint: aws.String(endpoint),
		Credentials: motoserver.Credentials()})
	ps := ssm.New(ssm.Options{Region: awsRegion, BaseEndpoint: aws.String(endpoint),
		Credentials: motoserver.Credentials()})

	password1 := "pw1-" + randomHex(8)
	secret1 := dbJSON(t, password1)
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("app/db"), SecretString: aws.String(secret1)})
	if err != nil {
		t.Fatalf("moto: CreateSecret: %v", err)
	}
	host := "db-" + randomHex(4) + ".internal"
	param, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/app/db-host"), Value: aws.String(host), Type: ssmtypes.ParameterTypeString})
	if err != nil {
		t.Fatalf("moto: PutParameter: %v", err)
	}
	n.forbid(password1, "the first password stored in moto")
	n.forbid(secret1, "the first secret string stored in moto")
	n.forbid(host, "the parameter value stored in moto")

	runAWSProvider(t, n, logDir, kubeconfig, endpoint, awsRegion)
	ns := s.irsaNamespace(t, n)

	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-app"},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider: "aws",
			Parameters: map[string]string{"objects": `
- objectName: app/db
  objectType: secretsmanager
  objectAlias: db.json
  jmesPath:
  - path: password
    objectAlias: db-password
- objectName: /app/db-host
  objectType: ssmparameter
  objectAlias: db-host
`},
			SecretObjects: []*secretsstorev1.SecretObject{{
				SecretName: "app-db",
				Type:       string(corev1.SecretTypeOpaque),
				Data:       []*secretsstorev1.SecretObjectData{{ObjectName: "db-password", Key: "password"}},
			}},
		},
	}
	if err := s.ctrl.Create(ctx, spc); err != nil {
		t.Fatalf("create SecretProviderClass: %v", err)
	}
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: spc.Name})
	target := n.targetPath(pod, "secrets")
	n.mustPublish(t, pod, "secrets")

	wantFiles := map[string]string{"db.json": secret1, "db-password": password1, "db-host": host}
	checkFiles(t, target, wantFiles)
	paramVersion := "1"
	if param.Version != 0 {
		paramVersion = jsonNumber(param.Version)
	}
	st := checkAWSPodStatus(t, n, pod, spc, map[string]string{"db.json": aws.ToString(created.VersionId), "db-host": paramVersion}, false)
	checkSyncedPassword(t, n, ns, "app-db", password1, pod)

	// A new value in Secrets Manager.
	password2 := "pw2-" + randomHex(8)
	secret2 := dbJSON(t, password2)
	put, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("app/db"), SecretString: aws.String(secret2)})
	if err != nil {
		t.Fatalf("moto: PutSecretValue: %v", err)
	}
	n.forbid(password2, "the second password stored in moto")
	n.forbid(secret2, "the second secret string stored in moto")
	if aws.ToString(put.VersionId) == aws.ToString(created.VersionId) {
		t.Fatalf("moto returned the same version id %q for the new value", aws.ToString(put.VersionId))
	}
	time.Sleep(awsFreshness + 500*time.Millisecond) // past the provider's freshness
	n.mustPublish(t, pod, "secrets")

	wantFiles["db.json"], wantFiles["db-password"] = secret2, password2
	checkFiles(t, target, wantFiles)
	st2 := checkAWSPodStatus(t, n, pod, spc, map[string]string{"db.json": aws.ToString(put.VersionId), "db-host": paramVersion}, true)
	if st2.ResourceVersion == st.ResourceVersion {
		t.Errorf("the pod status was not updated for the new version")
	}
	checkSyncedPassword(t, n, ns, "app-db", password2, pod)
	n.s.waitForEvent(t, pod, corev1.EventTypeNormal, "SecretRefreshed", spc.Name+": new content mounted")

	n.mustUnpublish(t, pod, "secrets")
}

func dbJSON(t *testing.T, password string) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"username": "admin", "password": password, "port": 5432})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func jsonNumber(v int64) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// ensureTokenAudience adds audience to the tokens the CSIDriver object asks
// kubelet to mint, as the suite's setup does for its own audience, and
// restores the object's token requests when the test ends.
func ensureTokenAudience(t *testing.T, s *suite, audience string) {
	t.Helper()
	drivers := s.kube.StorageV1().CSIDrivers()
	d, err := drivers.Get(t.Context(), driverName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CSIDriver %s: %v", driverName, err)
	}
	if slices.ContainsFunc(d.Spec.TokenRequests, func(r storagev1.TokenRequest) bool { return r.Audience == audience }) {
		return
	}
	orig := slices.Clone(d.Spec.TokenRequests)
	d.Spec.TokenRequests = append(d.Spec.TokenRequests, storagev1.TokenRequest{Audience: audience})
	if _, err := drivers.Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("add audience %s to CSIDriver %s: %v", audience, driverName, err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		d, err := drivers.Get(ctx, driverName, metav1.GetOptions{})
		if err == nil {
			d.Spec.TokenRequests = orig
			_, err = drivers.Update(ctx, d, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restoring the token requests of CSIDriver %s: %v", driverName, err)
		}
	})
}

// awsProviderKubeconfig returns a kubeconfig of a user with the provider's
// API access in deploy/providers/aws: get service accounts (IRSA roles),
// pods and nodes (the region of a class without one).
func awsProviderKubeconfig(t *testing.T, s *suite) string {
	t.Helper()
	return providerKubeconfig(t, s, awsProviderUser,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "pods", "nodes"}, Verbs: []string{"get"}})
}

// tokenProofRules are what every keymount provider needs to prove a
// mount's token, as deploy/providers/*/rbac.yaml grant: the issuer's keys,
// or a TokenReview.
var tokenProofRules = []rbacv1.PolicyRule{
	{NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}, Verbs: []string{"get"}},
	{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
}

// providerKubeconfig returns a kubeconfig of user, bound to a ClusterRole
// of tokenProofRules and rules, removed when the test ends.
func providerKubeconfig(t *testing.T, s *suite, user string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := t.Context()
	name := user
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      append(rules, tokenProofRules...),
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	createObject(t, s.ctrl, role)
	createObject(t, s.ctrl, binding)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		for _, err := range []error{s.ctrl.Delete(ctx, binding), s.ctrl.Delete(ctx, role)} {
			if err != nil {
				t.Errorf("deleting the RBAC of %s: %v", user, err)
			}
		}
	})
	path, _ := s.env.KubeconfigFor(t, user, nil)
	return path
}

// runAWSProvider starts keymount-provider-aws (startAWSProvider) with its log
// in logDir, and stops it and checks its log when the test ends.
func runAWSProvider(t *testing.T, n *node, logDir, kubeconfig, endpoint, region string, extraArgs ...string) {
	t.Helper()
	providerLog := filepath.Join(logDir, "provider-aws.log")
	provider := startAWSProvider(t, n, providerLog, kubeconfig, endpoint, region, extraArgs...)
	t.Cleanup(func() {
		if err := provider.stop(); err != nil {
			t.Errorf("stopping keymount-provider-aws: %v", err)
		}
		checkAWSProviderLog(t, n, providerLog)
	})
}

// irsaNamespace creates a namespace on n whose service account carries the
// IRSA role annotation, and returns it.
func (s *suite) irsaNamespace(t *testing.T, n *node) string {
	t.Helper()
	ns := n.newNamespace(t)
	sa, err := s.kube.CoreV1().ServiceAccounts(ns).Get(t.Context(), serviceAccount, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa.Annotations = map[string]string{"eks.amazonaws.com/role-arn": awsRoleARN}
	if _, err := s.kube.CoreV1().ServiceAccounts(ns).Update(t.Context(), sa, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("annotate service account: %v", err)
	}
	return ns
}

// startAWSProvider builds and starts keymount-provider-aws for the node's
// driver, every AWS endpoint at moto, and waits for its socket. region is
// its --region and AWS_REGION; "" starts it with neither, so that classes
// without a region take their node's. extraArgs are added.
func startAWSProvider(t *testing.T, n *node, logPath, kubeconfig, endpoint, region string, extraArgs ...string) *process {
	t.Helper()
	bin := buildAWSProvider(t, n.s.repo)
	env := slices.DeleteFunc(awsEnv(endpoint), func(e string) bool { return strings.HasPrefix(e, "AWS_REGION=") })
	args := []string{"--provider-dir=" + n.providerDir, "--name=aws", "--kubeconfig=" + kubeconfig,
		"--aws-endpoint=" + endpoint, "--sts-endpoint=" + endpoint, "--freshness=" + awsFreshness.String(), logVerbosity}
	if region != "" {
		env = append(env, "AWS_REGION="+region)
		args = append(args, "--region="+region)
	}
	args = append(args, extraArgs...)
	p, err := startEnvProcess("keymount-provider-aws", logPath, bin, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitForSocket(t.Context(), filepath.Join(n.providerDir, "aws.sock"), p); err != nil {
		p.kill()
		t.Fatalf("keymount-provider-aws did not start: %v\n%s", err, tail(logPath, logTailLines))
	}
	return p
}

// checkAWSProviderLog fails the test when the provider's log holds a
// forbidden value, a panic or a race, and prints its end on failure.
func checkAWSProviderLog(t *testing.T, n *node, logPath string) {
	t.Helper()
	n.checkLog(t, logPath)
	if t.Failed() {
		t.Logf("last lines of the AWS provider log:\n%s", tail(logPath, logTailLines))
	}
}

// checkFiles compares the regular files of a mounted volume with want.
func checkFiles(t *testing.T, target string, want map[string]string) {
	t.Helper()
	entries, err := os.ReadDir(target)
	if err != nil {
		t.Fatalf("read the volume: %v", err)
	}
	got := map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || e.IsDir() {
			continue // the atomic writer's internals
		}
		got[e.Name()] = readFile(t, target, e.Name())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of the volume (-want +got):\n%s", diff)
	}
}

// checkAWSPodStatus waits until the pod status reports the volume mounted
// and current, with exactly the given object versions by object ID, and
// ContentChanged=True when changed (after a refresh that changed the files).
func checkAWSPodStatus(t *testing.T, n *node, pod *corev1.Pod, spc *secretsstorev1.SecretProviderClass, versions map[string]string, changed bool) *secretsstorev1.SecretProviderClassPodStatus {
	t.Helper()
	wantConds := map[string]metav1.ConditionStatus{
		secretsstorev1.ConditionMounted:       metav1.ConditionTrue,
		secretsstorev1.ConditionCurrent:       metav1.ConditionTrue,
		secretsstorev1.ConditionSecretsSynced: metav1.ConditionTrue,
	}
	if changed {
		// A refresh changed the files: the report keymount-controller's
		// restart on change acts on.
		wantConds[secretsstorev1.ConditionContentChanged] = metav1.ConditionTrue
	}
	return n.s.waitForStatus(t, pod, spc.Name, func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		var errs []error
		if !st.Status.Mounted || st.Status.TargetPath != n.targetPath(pod, "secrets") {
			errs = append(errs, fmt.Errorf("mounted %v, target %q", st.Status.Mounted, st.Status.TargetPath))
		}
		conds := map[string]metav1.ConditionStatus{}
		for _, c := range st.Status.Conditions {
			conds[c.Type] = c.Status
		}
		if diff := cmp.Diff(wantConds, conds); diff != "" {
			errs = append(errs, fmt.Errorf("conditions (-want +got):\n%s", diff))
		}
		got := map[string]string{}
		for _, o := range st.Status.Objects {
			got[o.ID] = o.Version
		}
		if diff := cmp.Diff(versions, got); diff != "" {
			errs = append(errs, fmt.Errorf("object versions (-want +got):\n%s", diff))
		}
		return errors.Join(errs...)
	})
}

// checkSyncedPassword waits until the synced Secret holds exactly the
// password, with keymount's metadata.
func checkSyncedPassword(t *testing.T, n *node, ns, name, password string, pod *corev1.Pod) {
	t.Helper()
	n.s.waitForSecret(t, ns, name, syncedMeta("aws-app", pod), hasData(map[string][]byte{"password": []byte(password)}))
}
