package hostile_test

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/poll"
)

const (
	awsNS, awsSA, awsPod = "shop", "app", "web"
	awsRegion            = "eu-west-1"
	stsAudience          = "sts.amazonaws.com"
)

// TestAWSProviderProvesEveryToken drives the real keymount-provider-aws
// binary over its socket, against moto_server (behind a proxy counting
// every AWS request) and a real kube-apiserver, as an attacker on the node
// would: after the legitimate pod's mount warmed every cache (issuer keys,
// role, credentials, values), each bad token naming that pod gets its code,
// no file, and costs no AWS request.
func TestAWSProviderProvesEveryToken(t *testing.T) {
	env := k8senv.Start(t, k8senv.Options{})
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	pods := awsCluster(t, kube)
	aws := startCountingMoto(t)
	sock := startAWSProvider(t, providerKubeconfig(t, env, kube), aws.url)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := v1alpha1.NewCSIDriverProviderClient(conn)

	legit := requestToken(t, kube, awsSA, pods[awsPod], stsAudience)
	uid := string(pods[awsPod].UID)
	for range 2 { // the second mount is served from the caches
		resp, err := mountAs(t, client, uid, legit)
		if err != nil || len(resp.GetFiles()) != 1 {
			t.Fatalf("legitimate mount: %v (%d files)", err, len(resp.GetFiles()))
		}
	}
	before := aws.requests.Load()
	if before == 0 {
		t.Fatal("the legitimate mounts made no AWS request: the proxy counts nothing")
	}

	apiServer := signerOf(t, env, legit)
	claims := func(mod func(map[string]any)) map[string]any {
		c := apiServer.Claims(satokentest.Token{Audiences: []string{stsAudience}, Namespace: awsNS, ServiceAccount: awsSA,
			PodName: awsPod, PodUID: string(pods[awsPod].UID)})
		if mod != nil {
			mod(c)
		}
		return c
	}
	foreign := satokentest.New(t, "https://evil.example")
	now := time.Now()
	attacks := []struct {
		name, token string
		code        codes.Code
	}{
		{"no token", "", codes.InvalidArgument},
		{"garbage", "fake-web-identity-token", codes.PermissionDenied},
		{"expired", apiServer.SignClaims(t, claims(func(c map[string]any) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-3*time.Hour).Unix(), now.Add(-3*time.Hour).Unix(), now.Add(-2*time.Hour).Unix()
		})), codes.PermissionDenied},
		{"not yet valid", apiServer.SignClaims(t, claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), codes.PermissionDenied},
		{"wrong audience", requestToken(t, kube, awsSA, pods[awsPod], "vault"), codes.PermissionDenied},
		{"other service account", requestToken(t, kube, "other", pods["other-0"], stsAudience), codes.PermissionDenied},
		{"other pod", requestToken(t, kube, awsSA, pods["web-2"], stsAudience), codes.PermissionDenied},
		{"foreign issuer", foreign.SignClaims(t, claims(func(c map[string]any) { c["iss"] = foreign.URL })), codes.PermissionDenied},
		{"foreign key, cluster issuer", foreign.SignAs(t, apiServer.KeyID, claims(nil)), codes.PermissionDenied},
		{"alg none", apiServer.Unsigned(t, claims(nil)), codes.PermissionDenied},
		{"HS256 keyed with the cluster's public key", apiServer.HMAC(t, claims(nil)), codes.PermissionDenied},
	}
	for _, a := range attacks {
		resp, err := mountAs(t, client, uid, a.token)
		if status.Code(err) != a.code || len(resp.GetFiles()) != 0 {
			t.Errorf("%s: %v (%d files), want %s and no file", a.name, err, len(resp.GetFiles()), a.code)
		}
	}
	if got := aws.requests.Load() - before; got != 0 {
		t.Errorf("the attacks cost %d AWS requests, want 0", got)
	}
	// The legitimate pod still mounts.
	if resp, err := mountAs(t, client, uid, legit); err != nil || len(resp.GetFiles()) != 1 {
		t.Errorf("legitimate mount after the attacks: %v", err)
	}
}

// awsCluster creates namespace shop with service accounts app (IRSA role)
// and other, and pods web, web-2 (app) and other-0 (other); it returns
// them by name.
func awsCluster(t *testing.T, kube kubernetes.Interface) map[string]*corev1.Pod {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: awsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{awsSA, "other"} {
		obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa,
			Annotations: map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/" + sa}}}
		if _, err := kube.CoreV1().ServiceAccounts(awsNS).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[string]*corev1.Pod{}
	for name, sa := range map[string]string{awsPod: awsSA, "web-2": awsSA, "other-0": "other"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}}}}
		created, err := kube.CoreV1().Pods(awsNS).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[name] = created
	}
	return pods
}

// requestToken mints a token of service account sa for audience, bound to
// pod, through the TokenRequest API (as kubelet does).
func requestToken(t *testing.T, kube kubernetes.Interface, sa string, pod *corev1.Pod, audience string) string {
	t.Helper()
	exp := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(awsNS).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp,
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	return tr.Status.Token
}

// signerOf is an issuer signing with kube-apiserver's own service account
// key (envtest's sa-signer.key), under the key ID and issuer of token: to
// forge what the TokenRequest API will not mint.
func signerOf(t *testing.T, env *k8senv.Env, token string) *satokentest.Issuer {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Envtest.ControlPlane.APIServer.CertDir, "sa-signer.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("sa-signer.key: no PEM block")
	}
	// envtest writes an ECDSA key; a cluster's may be RSA.
	var key crypto.Signer
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		key, _ = k.(crypto.Signer)
	}
	if key == nil {
		t.Fatal("sa-signer.key: not an RSA or ECDSA private key")
	}
	parts := strings.Split(token, ".")
	var header struct {
		KeyID string `json:"kid"`
	}
	var payload struct {
		Issuer string `json:"iss"`
	}
	for i, into := range []any{&header, &payload} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(raw, into) != nil {
			t.Fatalf("token part %d is not base64url JSON: %v", i, err)
		}
	}
	return satokentest.WithKey(payload.Issuer, header.KeyID, key)
}

// providerKubeconfig provisions the provider's user with the rules of
// deploy/providers/aws/rbac.yaml and returns its kubeconfig.
func providerKubeconfig(t *testing.T, env *k8senv.Env, kube kubernetes.Interface) string {
	t.Helper()
	const user = "keymount-hostile-provider-aws"
	ctx := t.Context()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "pods", "nodes"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}, Verbs: []string{"get"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
	}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path, _ := env.KubeconfigFor(t, user, nil)
	return path
}

// countingMoto is moto_server behind a reverse proxy that counts every
// request the provider sends to AWS.
type countingMoto struct {
	url      string
	requests atomic.Int64
}

// startCountingMoto starts moto_server on 127.0.0.1, seeds secret app/db
// and returns the counting proxy in front of it.
func startCountingMoto(t *testing.T) *countingMoto {
	t.Helper()
	motoURL := motoserver.Start(t)
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	seedMoto(t, httpc, motoURL)
	target, _ := url.Parse(motoURL)
	c := &countingMoto{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.requests.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// seedMoto creates secret app/db with moto's JSON protocol (moto does not
// check signatures).
func seedMoto(t *testing.T, httpc *http.Client, motoURL string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, motoURL+"/",
		strings.NewReader(`{"Name":"app/db","SecretString":"{\"password\":\"hostile-test-pw\"}"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "secretsmanager.CreateSecret")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=testing/20260101/"+awsRegion+"/secretsmanager/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("moto CreateSecret: HTTP %d", resp.StatusCode)
	}
}

// startAWSProvider builds and starts keymount-provider-aws serving a
// socket in a short temporary directory, every AWS endpoint at awsURL,
// and returns the socket once it serves.
func startAWSProvider(t *testing.T, kubeconfig, awsURL string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kma")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "keymount-provider-aws")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/keymount/keymount/cmd/keymount-provider-aws").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/keymount-provider-aws: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--provider-dir="+dir, "--kubeconfig="+kubeconfig, "--aws-endpoint="+awsURL,
		"--sts-endpoint="+awsURL, "--region="+awsRegion, "--node-name=")
	cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_DISABLED=true", "AWS_REGION="+awsRegion,
		"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(dir, "provider.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		_ = logf.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("provider log:\n%s", log)
		}
	})
	sock := filepath.Join(dir, "aws.sock")
	if err := poll.Wait(t.Context(), waitLimit, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.New("keymount-provider-aws exited")
		default:
		}
		_, err := os.Stat(sock)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("keymount-provider-aws did not serve %s: %v", sock, err)
	}
	return sock
}

// mountAs mounts secret app/db for pod shop/web (uid) of service account app,
// presenting token ("" for none) for sts.amazonaws.com.
func mountAs(t *testing.T, client v1alpha1.CSIDriverProviderClient, uid, token string) (*v1alpha1.MountResponse, error) {
	t.Helper()
	attrs := map[string]string{
		"objects": "- {objectName: app/db, objectType: secretsmanager}", "region": awsRegion,
		"csi.storage.k8s.io/pod.namespace": awsNS, "csi.storage.k8s.io/serviceAccount.name": awsSA,
		"csi.storage.k8s.io/pod.name": awsPod, "csi.storage.k8s.io/pod.uid": uid,
	}
	if token != "" {
		tokens, _ := json.Marshal(map[string]any{stsAudience: map[string]string{"token": token,
			"expirationTimestamp": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
		attrs["csi.storage.k8s.io/serviceAccount.tokens"] = string(tokens)
	}
	raw, _ := json.Marshal(attrs)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	return client.Mount(ctx, &v1alpha1.MountRequest{Attributes: string(raw), Secrets: "{}", Permission: "420",
		TargetPath: "/var/lib/kubelet/pods/uid-web/volumes/kubernetes.io~csi/secrets/mount"})
}
