package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/maintb"
)

const (
	// driverUser is the identity of the drivers that sync Secrets: the
	// subject of the shipped ClusterRoleBindings.
	driverUser = "system:serviceaccount:kube-system:keymount"
	// noSyncUser is the identity of a driver deployed without the
	// secret-sync component: bound to ClusterRole keymount only.
	noSyncUser = "system:serviceaccount:kube-system:keymount-nosync"
	// tokenAudience is the audience the CSIDriver object asks kubelet to
	// mint tokens for.
	tokenAudience = "keymount-e2e"
	// binaryVersion is the version the binaries are built with; the driver
	// sends it in its user agent.
	binaryVersion = "e2e"
)

// suite is what every test shares: the binaries and the control plane.
type suite struct {
	repo string
	// bin holds keymount-driver and keymount-provider-local.
	bin string
	env *k8senv.Env
	// kube and ctrl are administrator clients.
	kube kubernetes.Interface
	ctrl client.Client
	// driverKubeconfig and noSyncKubeconfig authenticate as driverUser
	// and noSyncUser.
	driverKubeconfig, noSyncKubeconfig string
}

var (
	setupOnce sync.Once
	setupTB   = maintb.New("e2e setup")
	setupErr  error
	shared    *suite
	// envUsed is set once a test asked for the environment: from then on
	// the scan of the suite's logs must find something to scan.
	envUsed atomic.Bool
)

// TestMain runs the tests, then stops what the package-wide setup started,
// checks that no process and no mount was left behind, and scans every log
// the suite's processes wrote for the secret values the tests used.
func TestMain(m *testing.M) {
	code := m.Run()
	if code != 0 {
		setupTB.MarkFailed() // the environment's cleanup prints its logs' ends
	}
	setupTB.RunCleanups()
	checkNothingLeft(setupTB)
	if setupTB.Failed() && code == 0 {
		code = 1
	}
	if envUsed.Load() {
		if err := scanSuiteLogs(os.Stderr); err != nil {
			root, _ := suiteLogs.snapshot()
			fmt.Fprintf(os.Stderr, "FAIL: e2e log scan:\n%v\nThe logs are kept in %s.\n", err, root)
			os.Exit(1)
		}
	}
	if err := suiteLogs.remove(); err != nil {
		fmt.Fprintf(os.Stderr, "removing the suite's logs: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// env returns the package's binaries and control plane, building and
// starting them on first use. A test calling it fails when they cannot be
// built or started; it never skips.
func env(t *testing.T) *suite {
	t.Helper()
	envUsed.Store(true)
	setupOnce.Do(func() {
		setupErr = setupTB.Run(func() { shared = setup(setupTB) })
	})
	if setupErr != nil {
		t.Fatalf("the end-to-end environment did not start:\n%v", setupErr)
	}
	return shared
}

func setup(tb *maintb.TB) *suite {
	s := &suite{repo: repoRoot(tb)}
	s.bin = buildBinaries(tb, s.repo)
	s.env = k8senv.Start(tb, k8senv.Options{
		CRDDirectoryPaths: []string{filepath.Join(s.repo, "deploy", "crds")},
		AuditLog:          true,
		ControllerManager: true,
		// The built-in admin, edit and view roles take in the aggregated
		// roles deploy/ ships (TestAggregatedRoles).
		Controllers: []string{"clusterrole-aggregation-controller"},
	})
	scheme := k8sruntime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), secretsstorev1.AddToScheme(scheme)); err != nil {
		tb.Fatalf("scheme: %v", err)
	}
	var err error
	if s.ctrl, err = client.New(s.env.Config, client.Options{Scheme: scheme}); err != nil {
		tb.Fatalf("client: %v", err)
	}
	if s.kube, err = kubernetes.NewForConfig(s.env.Config); err != nil {
		tb.Fatalf("clientset: %v", err)
	}

	// The RBAC of deploy/ exactly as shipped: the base ClusterRole and its
	// binding, plus the secret-sync and restart-on-change components'.
	for _, f := range []string{"deploy/rbac.yaml", "deploy/components/secret-sync/rbac.yaml", "deploy/components/restart-on-change/rbac.yaml"} {
		createManifests(tb, s.ctrl, filepath.Join(s.repo, filepath.FromSlash(f)), "ClusterRole", "ClusterRoleBinding")
	}
	// And the component's admission policy, which admits keymount-
	// controller's workload patches only when they set rollout annotations.
	createManifests(tb, s.ctrl, filepath.Join(s.repo, "deploy", "components", "restart-on-change", "admission.yaml"),
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	// A driver deployed without components/secret-sync has the base role only.
	createObject(tb, s.ctrl, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "keymount-e2e-nosync"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "keymount"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "keymount-nosync"}},
	})
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}
	s.driverKubeconfig, _ = s.env.KubeconfigFor(tb, driverUser, saGroups)
	s.noSyncKubeconfig, _ = s.env.KubeconfigFor(tb, noSyncUser, saGroups)

	// The CSIDriver kubelet reads, as shipped, asking for one token.
	csiDriver := &storagev1.CSIDriver{}
	decodeFile(tb, filepath.Join(s.repo, "deploy", "csidriver.yaml"), csiDriver)
	csiDriver.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: tokenAudience}}
	createObject(tb, s.ctrl, csiDriver)
	return s
}

// repoRoot is the directory of the module's go.mod.
func repoRoot(tb testing.TB) string {
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		tb.Fatalf("finding the module root with `go env GOMOD`: %q, %v", gomod, err)
	}
	return filepath.Dir(gomod)
}

// goTool is the go command: go test puts the toolchain's bin directory
// first in the test binary's PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// buildBinaries builds the driver and the local provider, without -race,
// and returns their directory.
func buildBinaries(tb testing.TB, repo string) string {
	bin := filepath.Join(tb.TempDir(), "bin")
	cmd := exec.Command(goTool(), "build", "-ldflags=-X=main.version="+binaryVersion, "-o", bin+string(filepath.Separator),
		"./cmd/keymount-driver", "./cmd/keymount-provider-local")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build of the binaries: %v\n%s", err, out)
	}
	return bin
}

// createManifests creates every object of a multi-document YAML file, all
// of which must be of the given kinds.
func createManifests(tb testing.TB, c client.Client, path string, kinds ...string) {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	n := 0
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if !slices.Contains(kinds, u.GetKind()) {
			tb.Fatalf("%s: unexpected %s %q: want only %v", path, u.GetKind(), u.GetName(), kinds)
		}
		createObject(tb, c, u)
		n++
	}
	if n == 0 {
		tb.Fatalf("%s holds no object", path)
	}
}

func createObject(tb testing.TB, c client.Client, obj client.Object) {
	if err := c.Create(tb.Context(), obj); err != nil {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk == (schema.GroupVersionKind{}) {
			gvk.Kind = fmt.Sprintf("%T", obj)
		}
		tb.Fatalf("create %s %q: %v", gvk.Kind, obj.GetName(), err)
	}
}

// decodeFile decodes one YAML document into obj.
func decodeFile(tb testing.TB, path string, obj any) {
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(obj); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}
