//go:build integration

package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/local"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// TestBinaryAgainstAPIServer builds keymount-controller and runs it as a
// process with the sync controller's flags against a real API server and
// the local provider: it takes the Lease, answers /healthz and /readyz,
// creates a SecretSync's Secret, counts it in /metrics, and on SIGTERM
// exits 0 and releases the Lease.
func TestBinaryAgainstAPIServer(t *testing.T) {
	env, cs, c, ns := startSharedCluster(t)
	ctx := t.Context()
	sockDir := serveLocalStore(t)

	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	proc := startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--leader-elect", "--provider-volume=" + sockDir,
		"--token-request-audience=aud-one,aud-two", "--rotation-poll-interval=0s",
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + probeAddr,
	}, syncrequest.EnvPodNamespace+"="+ns.system, syncrequest.EnvPodName+"=keymount-controller-0")

	for _, path := range []string{"/healthz", "/readyz"} {
		poll.Until(t, "GET "+path, func(ctx context.Context) (bool, error) {
			code, _ := get(ctx, "http://"+probeAddr+path)
			return code == http.StatusOK, nil
		})
	}
	lease := types.NamespacedName{Namespace: ns.system, Name: leaderElectionID}
	poll.Until(t, "the Lease held", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(lease.Namespace).Get(ctx, lease.Name, metav1.GetOptions{})
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})

	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.app, Name: "store"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "local", Parameters: map[string]string{"objects": "- objectName: password\n"}},
	}
	ss := &ss1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.app, Name: "db"},
		Spec: ss1.SecretSyncSpec{SecretProviderClassName: "store", ServiceAccountName: "app", SecretObject: ss1.SecretObject{
			Type: "Opaque", Data: []ss1.SecretObjectData{{SourcePath: "password", TargetKey: "password"}},
		}},
	}
	create(t, c, class, ss)
	poll.Until(t, "the Secret", secretHolds(c, ns.app, "password", "from-the-store"))
	poll.Until(t, "the sync counted in /metrics", func(ctx context.Context) (bool, error) {
		code, body := get(ctx, "http://"+metricsAddr+"/metrics")
		return code == http.StatusOK && strings.Contains(body, `keymount_controller_syncs_total{result="created"} 1`) &&
			strings.Contains(body, "keymount_controller_provider_call_duration_seconds_bucket") &&
			// telemetry.Register's: the staleness gauges (no SecretSync
			// fails; one succeeded) and the fan-out's, off here.
			strings.Contains(body, "keymount_controller_syncs_failing 0") &&
			strings.Contains(body, "keymount_controller_sync_stale_seconds 0") &&
			!strings.Contains(body, "keymount_controller_sync_last_success_timestamp_seconds 0\n") &&
			strings.Contains(body, "keymount_controller_sync_last_success_timestamp_seconds "), nil
	})

	// Deleted while the binary runs, the SecretSync leaves nothing a later
	// test's binary on the shared control plane would sync.
	if err := c.Delete(ctx, ss); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the SecretSync deleted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ss), &ss1.SecretSync{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})

	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0", err)
	}
	l, err := cs.CoordinationV1().Leases(lease.Namespace).Get(ctx, lease.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Errorf("the Lease is still held by %q after a clean stop", *l.Spec.HolderIdentity)
	}
}

// crds are keymount's CustomResourceDefinitions.
var crds = []string{"../../deploy/crds"}

// startCluster starts an API server with keymount's CRDs, the
// controller's namespace keymount-system and "app" with the service account
// "app"; it returns the environment, a clientset and a client with
// keymount's types.
func startCluster(t testing.TB) (*k8senv.Env, kubernetes.Interface, client.Client) {
	t.Helper()
	// Own control plane: the controller binary watches every namespace, and the tests calling this leave SecretSyncs in the fixed namespace app that a later test's binary would sync (its metrics and copies asserted on).
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: crds})
	cs, c := clients(t, env)
	createNamespaces(t, cs, namespaces{system: "keymount-system", app: "app"}, false)
	return env, cs, c
}

// startSharedCluster is startCluster on the package's shared control plane
// (k8senv.Shared), with namespaces of the test's own (GenerateName, from
// keymount-system- and app-). A test on it leaves nothing another test's
// binary acts on in a way that test asserts on: the shared tests run one
// after the other, each binary stops with its test, and none asserts on
// objects outside its own namespaces.
func startSharedCluster(t testing.TB) (*k8senv.Env, kubernetes.Interface, client.Client, namespaces) {
	t.Helper()
	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: crds})
	cs, c := clients(t, env)
	ns := createNamespaces(t, cs, namespaces{system: "keymount-system-", app: "app-"}, true)
	return env, cs, c, ns
}

// clients returns a clientset and a client with keymount's types for env.
func clients(t testing.TB, env *k8senv.Env) (kubernetes.Interface, client.Client) {
	t.Helper()
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := pushv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(env.Config), c
}

// namespaces are a test's controller namespace and application namespace.
type namespaces struct{ system, app string }

// create creates objs, in order.
func create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// secretHolds is a poll condition: Secret db's key in namespace ns holds want.
func secretHolds(c client.Client, ns, key, want string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, &s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return string(s.Data[key]) == want, nil
	}
}

// createNamespaces makes the controller's namespace and the application
// namespace, with the service account "app", named as ns says or, with
// generate, from ns's names as GenerateName prefixes; it returns their names.
func createNamespaces(t testing.TB, cs kubernetes.Interface, ns namespaces, generate bool) namespaces {
	t.Helper()
	ctx := t.Context()
	for _, name := range []*string{&ns.system, &ns.app} {
		meta := metav1.ObjectMeta{Name: *name}
		if generate {
			meta = metav1.ObjectMeta{GenerateName: *name}
		}
		created, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: meta}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		*name = created.Name
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns.app).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// buildBinary builds keymount-controller into a temporary directory.
func buildBinary(t testing.TB) string {
	t.Helper()
	return goBuild(t, ".", "keymount-controller")
}

// goBuild builds the command in dir (relative to this package) into a
// temporary directory as name.
func goBuild(t testing.TB, dir, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test builds %s and needs the go command: %v", name, err)
	}
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, dir).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, out)
	}
	return bin
}

// startBinary starts bin; it dies with the test (parent-death signal) and
// is killed at cleanup if still running. Its output goes to the test log
// on failure.
func startBinary(t testing.TB, bin string, args []string, env ...string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("keymount-controller log:\n%s", tail(string(b), 8000))
			}
		}
	})
	return cmd
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// serveLocal serves the local provider over root as "local" in dir.
// serveLocalStore serves the local provider on a socket directory of its
// own, from a store holding "password" (from-the-store), and returns the
// directory (--provider-volume).
func serveLocalStore(t *testing.T) string {
	t.Helper()
	store := t.TempDir()
	if err := os.WriteFile(filepath.Join(store, "password"), []byte("from-the-store"), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir := sockettest.Dir(t)
	serveLocal(t, sockDir, store)
	return sockDir
}

func serveLocal(t testing.TB, dir, root string) {
	t.Helper()
	p, err := local.New(root)
	if err != nil {
		t.Fatal(err)
	}
	ctrltest.ServeProvider(t, dir, "local", p)
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func get(ctx context.Context, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
