package k8senv_test

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

const (
	namespace      = "k8senv"
	serviceAccount = "workload"
	audience       = "keymount-test"
	// eventually bounds waits for the control plane to act (the audit log's
	// ResponseComplete event, the garbage collector): a bound, not a target.
	eventually = 60 * time.Second
)

// TestEnvironment starts one environment with every option, proves each part
// of it while it runs, and that its cleanup leaves no process behind.
func TestEnvironment(t *testing.T) {
	var apiServer, etcd string
	t.Run("running", func(t *testing.T) {
		env := k8senv.Start(t, k8senv.Options{AuditLog: true, ControllerManager: true, Scheduler: true})
		apiServer = env.Config.Host
		etcd = env.Envtest.ControlPlane.Etcd.URL.String()
		testRunning(t, env)
	})
	if apiServer == "" {
		t.Fatal("the environment did not start")
	}

	// t.Cleanup of "running" has stopped everything, without a restart.
	for _, p := range childProcesses(t, os.Getpid()) {
		if !p.zombie {
			t.Errorf("%s (pid %d) still runs after cleanup", p.binary, p.pid)
		}
	}
	for _, u := range []string{apiServer, etcd} {
		if conn, err := dial(u); err == nil {
			_ = conn.Close()
			t.Errorf("%s still accepts connections after cleanup", u)
		}
	}
}

// testRunning runs the checks of a running environment, one subtest each.
func testRunning(t *testing.T, env *k8senv.Env) {
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("listens on 127.0.0.1 only", func(t *testing.T) { testLoopbackOnly(t, env) })
	var token string
	t.Run("TokenRequest mints a pod-bound token", func(t *testing.T) { token = testTokenRequest(t, client) })
	t.Run("audit log records the token request without the token", func(t *testing.T) {
		if token == "" {
			t.Fatal("no token was minted (see the subtest above)")
		}
		testAuditLog(t, env, token)
	})
	t.Run("KubeconfigFor authenticates as the user", func(t *testing.T) { testKubeconfigFor(t, env) })
	t.Run("garbage collector deletes a ConfigMap whose owner Pod is gone", func(t *testing.T) { testGarbageCollector(t, client) })
	t.Run("scheduler binds a Pod to a Ready Node", func(t *testing.T) { testScheduler(t, client) })
}

// testLoopbackOnly checks every socket etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler listen on.
func testLoopbackOnly(t *testing.T, env *k8senv.Env) {
	if host, err := url.Parse(env.Config.Host); err != nil || host.Hostname() != "127.0.0.1" {
		t.Errorf("admin config host = %q, want https://127.0.0.1:<port>", env.Config.Host)
	}
	if got := env.Envtest.ControlPlane.Etcd.URL.Hostname(); got != "127.0.0.1" {
		t.Errorf("etcd client URL host = %q, want 127.0.0.1", got)
	}
	var seen []string
	for _, p := range childProcesses(t, os.Getpid()) {
		if p.zombie {
			continue
		}
		seen = append(seen, p.binary)
		addrs := listenAddrs(t, p.pid)
		if len(addrs) == 0 {
			t.Errorf("%s (pid %d) listens on no TCP port", p.binary, p.pid)
		}
		for _, a := range addrs {
			if !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
				t.Errorf("%s (pid %d) listens on %s, want 127.0.0.1 only", p.binary, p.pid, a.String())
			}
		}
	}
	slices.Sort(seen)
	if want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}; !slices.Equal(seen, want) {
		t.Errorf("child processes = %v, want %v", seen, want)
	}
}

// testTokenRequest mints a token bound to a Pod, proves with a TokenReview
// that it authenticates as the Pod's ServiceAccount, and returns it.
func testTokenRequest(t *testing.T, client kubernetes.Interface) string {
	ctx := t.Context()
	pod := createPod(t, client, "bound")
	expiry := int64(600)
	token, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{audience},
			ExpirationSeconds: &expiry,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	review, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token.Status.Token, Audiences: []string{audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	st := review.Status
	if !st.Authenticated || st.Error != "" {
		t.Fatalf("the token does not authenticate: %+v", st)
	}
	if want := "system:serviceaccount:" + namespace + ":" + serviceAccount; st.User.Username != want {
		t.Errorf("token user = %q, want %q", st.User.Username, want)
	}
	if got := st.User.Extra["authentication.kubernetes.io/pod-uid"]; !slices.Equal(got, authenticationv1.ExtraValue{string(pod.UID)}) {
		t.Errorf("token pod-uid = %v, want [%s]", got, pod.UID)
	}
	return token.Status.Token
}

// testAuditLog finds the TokenRequest in the audit log, at the Metadata
// level: the token itself must not be there.
func testAuditLog(t *testing.T, env *k8senv.Env, token string) {
	var found *auditv1.Event
	var events []auditv1.Event
	err := poll.Wait(t.Context(), eventually, func(context.Context) (bool, error) {
		events = env.AuditEvents(t)
		found = findTokenRequest(events)
		return found != nil, nil
	})
	if err != nil {
		t.Fatalf("no ResponseComplete audit event for the TokenRequest among %d events: %v", len(events), err)
	}
	if found.User.Username != "admin" || found.ResponseStatus == nil || found.ResponseStatus.Code != 201 || found.Level != auditv1.LevelMetadata {
		t.Errorf("TokenRequest event: user %q, status %v, level %s; want admin, 201, Metadata", found.User.Username, found.ResponseStatus, found.Level)
	}
	raw, err := json.Marshal(events)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), token) {
		t.Error("the audit log holds the minted token")
	}
}

// testKubeconfigFor authenticates with a provisioned user's kubeconfig file.
func testKubeconfigFor(t *testing.T, env *k8senv.Env) {
	ctx := t.Context()
	path, cfg := env.KubeconfigFor(t, "alice", []string{"team-a"})
	fromFile, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSuffix(fromFile.Host, "/") != strings.TrimSuffix(cfg.Host, "/") {
		t.Errorf("kubeconfig server = %q, config host = %q", fromFile.Host, cfg.Host)
	}
	alice := kubernetes.NewForConfigOrDie(fromFile)
	review, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	ui := review.Status.UserInfo
	if ui.Username != "alice" || !slices.Contains(ui.Groups, "team-a") {
		t.Errorf("authenticated as %q in %v, want alice in team-a", ui.Username, ui.Groups)
	}
	// No permission comes with the identity.
	if _, err := alice.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice listing Secrets: err = %v, want Forbidden", err)
	}
}

// testGarbageCollector deletes a Pod that owns a ConfigMap and waits for
// kube-controller-manager's garbage collector to delete the ConfigMap, while
// ConfigMaps with a living owner or no owner stay.
func testGarbageCollector(t *testing.T, client kubernetes.Interface) {
	ctx := t.Context()
	owner := createPod(t, client, "owner")
	living := createPod(t, client, "living")
	orphan := createConfigMap(t, client, "orphan", owner)
	kept := createConfigMap(t, client, "kept", living)
	unowned := createConfigMap(t, client, "unowned", nil)

	if err := client.CoreV1().Pods(namespace).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := poll.Wait(ctx, eventually, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, orphan.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("ConfigMap %s, owned by the deleted Pod %s, was not deleted within %s", orphan.Name, owner.Name, eventually)
	}
	for _, cm := range []*corev1.ConfigMap{kept, unowned} {
		if _, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap %s, whose owner exists or which has none: %v", cm.Name, err)
		}
	}
}

// dial opens a TCP connection to the host of rawURL.
func dial(rawURL string) (net.Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return net.DialTimeout("tcp", u.Host, 5*time.Second)
}

func findTokenRequest(events []auditv1.Event) *auditv1.Event {
	for i := range events {
		ev := &events[i]
		ref := ev.ObjectRef
		if ev.Stage == auditv1.StageResponseComplete && ev.Verb == "create" && ref != nil &&
			ref.Resource == "serviceaccounts" && ref.Subresource == "token" &&
			ref.Namespace == namespace && ref.Name == serviceAccount {
			return ev
		}
	}
	return nil
}

func createPod(t *testing.T, client kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	pod, err := client.CoreV1().Pods(namespace).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: serviceAccount,
			Containers:         []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Pod %s: %v", name, err)
	}
	return pod
}

func createConfigMap(t *testing.T, client kubernetes.Interface, name string, owner *corev1.Pod) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID}}
	}
	cm, err := client.CoreV1().ConfigMaps(namespace).Create(t.Context(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap %s: %v", name, err)
	}
	return cm
}
