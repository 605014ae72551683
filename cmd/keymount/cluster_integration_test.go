//go:build integration

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/tests/k8senv"
)

const (
	// cliUser is the identity the CLI uses in these tests: an administrator
	// (system:masters) of its own, so the audit log tells its requests apart.
	cliUser = "keymount-cli-test"
	// classNamespace holds the cluster's demo class.
	classNamespace = "team"
	// syncedSecret is the Secret the class's secretObjects ask for: a
	// driver with a Cluster would create it, a dry run must not.
	syncedSecret = "demo-synced"
)

// TestMountFromCluster mounts a class read from a real kube-apiserver, then
// proves from the audit log that the CLI only ever read from it.
func TestMountFromCluster(t *testing.T) {
	requireRoot(t)
	// Own control plane: it reads the audit log, which only its own requests may fill.
	kube := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}, AuditLog: true})
	admin := newAdminClient(t, kube.Config)
	createDemoClass(t, admin)
	kubeconfig, _ := kube.KubeconfigFor(t, cliUser, []string{"system:masters"})
	server := apiServer(kube)

	t.Run("mount and unmount", func(t *testing.T) {
		e := newEnv(t, demoClass)
		var out bytes.Buffer
		args := []string{"--kubeconfig", kubeconfig, "--class", "demo", "--pod-namespace", classNamespace,
			"--local-root", e.root, "--target", e.target, "--state-dir", e.stateDir}
		if err := mountCommand(t.Context(), args, &out, &out); err != nil {
			t.Fatalf("mount: %v\n%s", err, out.String())
		}
		wantOut := []string{
			`mounted 3 files of SecretProviderClass "demo" (provider "local")`,
			fmt.Sprintf("class read from namespace %q of the API server %s;", classNamespace, server),
			"dry run: nothing was written to the cluster",
		}
		for _, want := range wantOut {
			if !strings.Contains(out.String(), want) {
				t.Errorf("mount output lacks %q:\n%s", want, out.String())
			}
		}
		checkFiles(t, e.target, map[string]string{
			"db/password":           demoFiles["db-password"],
			"api-token":             demoFiles["api-token"],
			"config/app.properties": demoFiles["config/app.properties"],
		})
		checkMode(t, filepath.Join(e.target, "api-token"), 0o600)

		out.Reset()
		if err := unmountCommand(t.Context(), []string{e.target, "--state-dir", e.stateDir}, &out, &out); err != nil {
			t.Fatalf("unmount: %v\n%s", err, out.String())
		}
		checkNothingMounted(t, e)
	})

	t.Run("the context's namespace", func(t *testing.T) {
		e := newEnv(t, demoClass)
		withContext := addContext(t, kubeconfig, "team-context", classNamespace)
		var out bytes.Buffer
		args := []string{"--kubeconfig", withContext, "--context", "team-context", "--class", "demo",
			"--local-root", e.root, "--target", e.target, "--state-dir", e.stateDir}
		if err := mountCommand(t.Context(), args, &out, &out); err != nil {
			t.Fatalf("mount with --context: %v\n%s", err, out.String())
		}
		checkFiles(t, e.target, map[string]string{"api-token": demoFiles["api-token"]})
		if err := unmountCommand(t.Context(), []string{e.target, "--state-dir", e.stateDir}, &out, &out); err != nil {
			t.Fatalf("unmount: %v", err)
		}
	})

	for _, tt := range []struct{ name, class, namespace string }{
		{name: "class not found", class: "nope", namespace: classNamespace},
		{name: "class in another namespace", class: "demo", namespace: "default"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, demoClass)
			var out bytes.Buffer
			args := []string{"--kubeconfig", kubeconfig, "--class", tt.class, "--pod-namespace", tt.namespace,
				"--local-root", e.root, "--target", e.target, "--state-dir", e.stateDir}
			err := mountCommand(t.Context(), args, &out, &out)
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("mount: err = %v (code %v), want FailedPrecondition", err, status.Code(err))
			}
			for _, want := range []string{
				"mount failed (FailedPrecondition): secretproviderclass not found",
				fmt.Sprintf("%q in namespace %q", tt.class, tt.namespace),
				"API server " + server + ":",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			checkNothingMounted(t, e)
		})
	}

	checkReadOnly(t, kube, admin)
}

// TestMountFromClusterWithoutCRDs: an API server that does not serve
// SecretProviderClasses is told apart from a missing class.
func TestMountFromClusterWithoutCRDs(t *testing.T) {
	e := newEnv(t, demoClass)
	// Own control plane: one without keymount's CRDs, which the package's other test installs.
	kube := k8senv.Start(t, k8senv.Options{})
	kubeconfig, _ := kube.KubeconfigFor(t, cliUser, []string{"system:masters"})
	var out bytes.Buffer
	args := []string{"--kubeconfig", kubeconfig, "--class", "demo", "--local-root", e.root, "--target", e.target, "--state-dir", e.stateDir}
	err := mountCommand(t.Context(), args, &out, &out)
	want := fmt.Sprintf("the API server %s serves no SecretProviderClass secrets-store.csi.x-k8s.io/v1: install keymount's CRDs", apiServer(kube))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("mount: err = %v, want one containing %q", err, want)
	}
	checkNothingMounted(t, e)
}

// TestMountFromUnreachableCluster needs no API server: nothing listens on
// the kubeconfig's server.
func TestMountFromUnreachableCluster(t *testing.T) {
	e := newEnv(t, demoClass)
	server := "https://" + closedAddress(t)
	kubeconfig := filepath.Join(e.dir, "kubeconfig")
	writeFile(t, kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: someone
  user:
    token: test-token-not-a-secret
contexts:
- name: gone
  context: {cluster: gone, user: someone}
current-context: gone
`, server))
	var out bytes.Buffer
	args := []string{"--kubeconfig", kubeconfig, "--class", "demo", "--target", e.target, "--state-dir", e.stateDir}
	err := mountCommand(t.Context(), args, &out, &out)
	if want := "cannot reach the API server " + server + ": "; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("mount: err = %v, want one containing %q", err, want)
	}
	if strings.Contains(err.Error(), "test-token-not-a-secret") {
		t.Errorf("error shows the token: %v", err)
	}
	var uerr *usageError
	if errors.As(err, &uerr) {
		t.Errorf("usage error %v, want a plain one", err)
	}
	checkNothingMounted(t, e)
}

// apiServer is the server URL the environment's kubeconfigs name.
func apiServer(kube *k8senv.Env) string {
	return strings.TrimSuffix(kube.Config.Host, "/")
}

func newAdminClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := secretsstorev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createDemoClass creates the demo class in classNamespace, with a
// secretObjects entry a driver with a Cluster would sync.
func createDemoClass(t *testing.T, c client.Client) {
	t.Helper()
	classes, err := class.Parse([]byte(demoClass))
	if err != nil {
		t.Fatal(err)
	}
	spc := classes[0]
	spc.Namespace = classNamespace
	spc.Spec.SecretObjects = []*secretsstorev1.SecretObject{{
		SecretName: syncedSecret, Type: string(corev1.SecretTypeOpaque),
		Data: []*secretsstorev1.SecretObjectData{{ObjectName: "api-token", Key: "token"}},
	}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: classNamespace}}
	for _, obj := range []client.Object{ns, spc} {
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// addContext copies the kubeconfig at path with one more context, name,
// for its current context's cluster and user in namespace.
func addContext(t *testing.T, path, name, namespace string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := *cfg.Contexts[cfg.CurrentContext]
	ctx.Namespace = namespace
	cfg.Contexts[name] = &ctx
	out := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReadOnly: the CLI read the class (so the audit log does record its
// requests) and never wrote, and nothing a Cluster writes exists.
func checkReadOnly(t *testing.T, kube *k8senv.Env, admin client.Client) {
	t.Helper()
	classGets := 0
	for _, ev := range kube.AuditEvents(t) {
		// One event per request: the later stages repeat it.
		if ev.User.Username != cliUser || ev.Stage != auditv1.StageRequestReceived {
			continue
		}
		switch ev.Verb {
		case "get", "list", "watch":
		default:
			t.Errorf("the CLI wrote to the API server: %s %s", ev.Verb, ev.RequestURI)
		}
		if ev.Verb == "get" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "secretproviderclasses" {
			classGets++
		}
	}
	if classGets == 0 {
		t.Error("the audit log has no GET of a SecretProviderClass by the CLI: the check above proves nothing")
	}

	var statuses secretsstorev1.SecretProviderClassPodStatusList
	if err := admin.List(t.Context(), &statuses); err != nil {
		t.Fatal(err)
	}
	if len(statuses.Items) > 0 {
		t.Errorf("%d SecretProviderClassPodStatus exist after a dry run, want none", len(statuses.Items))
	}
	var secrets corev1.SecretList
	if err := admin.List(t.Context(), &secrets, client.InNamespace(classNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		t.Errorf("Secret %s exists after a dry run, want none", s.Name)
	}
	var events corev1.EventList
	if err := admin.List(t.Context(), &events, client.InNamespace(classNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		t.Errorf("event %s %s: %s exists after a dry run, want none", ev.Type, ev.Reason, ev.Message)
	}
}

// closedAddress returns a 127.0.0.1 address nothing listens on.
func closedAddress(t *testing.T) string {
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
