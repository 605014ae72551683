package nodeenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/childproc"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

const (
	// DriverName is the CSI driver name pods use, as upstream.
	DriverName = "secrets-store.csi.k8s.io"
	// Image is the container image every pod of the tier runs: the probe
	// program. It is imported into containerd, never pulled.
	Image = "keymount.test/probe:v1"
	// driverUser is the driver's identity, bound by the shipped RBAC.
	driverUser = "system:serviceaccount:kube-system:keymount"
	// startTimeout bounds the start of one part of the node (a loaded
	// 2-core machine is slow; a part that does not start fails the test).
	startTimeout = 90 * time.Second
	// stopGrace is how long a process may take to exit after SIGTERM.
	stopGrace = 20 * time.Second
)

// Options configure a node.
type Options struct {
	// TokenAudiences, when set, make the CSIDriver ask kubelet for a
	// service-account token of each audience for every volume.
	TokenAudiences []string
	// KubeletSyncFrequency is kubelet's syncFrequency, which paces its
	// republish of requiresRepublish volumes (default 1m, plus jitter).
	KubeletSyncFrequency time.Duration
	// Helm installs keymount the way a cluster would: `helm install` of
	// deploy/charts/keymount (see Release), the driver and the local
	// provider running as DaemonSet pods from images packed from the work
	// tree, with the kubelet root and the driver's state directory on
	// shared mounts for Bidirectional propagation. kube-scheduler, the
	// DaemonSet controller and the ServiceAccount admission plugin run.
	// Without it, the driver and provider are host processes.
	Helm bool
	// Controller, with Helm, also installs keymount-controller
	// (controller.enabled, restartOnChange.enabled): one replica on the
	// node's network with the local provider as its sidecar, refreshing
	// only on a trigger; kube-controller-manager also runs the Deployment
	// and ReplicaSet controllers.
	Controller bool
	// Deployments: kube-controller-manager also runs the Deployment and
	// ReplicaSet controllers. Without Helm no scheduler runs: a
	// Deployment's pod template names the node (ProbePod does).
	Deployments bool
	// ScanLogs, when set, is given every log of the node and its control
	// plane once the node is down, before they are removed with its root;
	// an error fails the test.
	ScanLogs func(files []string) error
	// ChartValues, with Helm, are merged over the node's own chart values
	// (maps key by key, anything else replaced).
	ChartValues map[string]any
}

// Node is a running node and its control plane.
type Node struct {
	// Name is the Node object's name and the driver's node ID.
	Name string
	// shimSocketsBefore are the shim sockets there before containerd
	// started (another containerd's): not the node's.
	shimSocketsBefore map[string]bool
	// Root is the temporary root everything of the node lives under.
	Root string
	// KubeletRoot is kubelet's --root-dir (and the driver's
	// --kubelet-root-dir).
	KubeletRoot string
	// ProviderDir is the directory of provider sockets the driver searches:
	// a test may serve a provider of its own there.
	ProviderDir string
	// ProviderRoot is the local provider's --root: the objects it serves.
	ProviderRoot string
	// CgroupRoot is kubelet's cgroupRoot, in every cgroup hierarchy.
	CgroupRoot string

	Env  *k8senv.Env
	Kube kubernetes.Interface
	Ctrl client.Client

	assets, repo, bin string
	logDir, podLogs   string
	stateDir          string
	driverKubeconfig  string
	kubeletConfig     kubeletConfig

	forker *childproc.Forker

	mu         sync.Mutex
	containerd *proc
	kubelet    *proc
	driver     *proc
	provider   *proc
	// helm is the Helm node's release; nil without Options.Helm.
	helm *helmState
}

// Start builds keymount's binaries and the probe image, starts the control
// plane, containerd, kubelet, the local provider and the driver, and returns
// once the Node is Ready and the driver registered with kubelet. The node is
// taken down when tb's cleanups run.
func Start(tb testing.TB, opts Options) *Node {
	tb.Helper()
	root := shortTempDir(tb)
	n := &Node{
		Name:   "node-" + randomSuffix(),
		Root:   root,
		assets: os.Getenv(k8senv.AssetsEnv),
		repo:   repoRoot(tb),
		forker: childproc.NewForker(),
	}
	n.CgroupRoot = "/keymount-" + n.Name
	n.KubeletRoot = mkdir(tb, root, "kubelet")
	n.ProviderDir = mkdir(tb, root, "providers")
	n.ProviderRoot = mkdir(tb, root, "objects")
	n.logDir = mkdir(tb, root, "logs")
	n.podLogs = mkdir(tb, root, "pod-logs")
	n.stateDir = mkdir(tb, root, "keymount")
	n.bin = mkdir(tb, root, "bin")
	checkAssets(tb, n.assets)

	// Cleanups run last registered first: the root goes last, after the
	// control plane (registered by k8senv.Start below), which goes after
	// the node's own parts (registered after it).
	tb.Cleanup(func() {
		n.forker.Close()
		if opts.ScanLogs != nil {
			if err := opts.ScanLogs(n.LogFiles(tb)); err != nil {
				tb.Errorf("nodeenv: %v", err)
			}
		}
		if left := append(Leftovers(n.Root, n.CgroupRoot), n.leftoverShimSockets()...); len(left) > 0 {
			tb.Errorf("nodeenv: the node left %s", strings.Join(left, "; "))
			return
		}
		if err := os.RemoveAll(n.Root); err != nil {
			tb.Errorf("nodeenv: removing %s: %v", n.Root, err)
		}
	})

	n.buildBinaries(tb, opts)
	cp := k8senv.Options{
		CRDDirectoryPaths: []string{filepath.Join(n.repo, "deploy", "crds")},
		ControllerManager: true,
		// Jobs run pods on the node (their template names it).
		Controllers: []string{"job-controller"},
		Dir:         mkdir(tb, root, "control-plane"),
	}
	if opts.Helm {
		// DaemonSet pods name no node: the scheduler binds them.
		cp.Controllers = append(cp.Controllers, "daemonset-controller")
		cp.Scheduler = true
		cp.ServiceAccountAdmission = true
	}
	if opts.Deployments || (opts.Helm && opts.Controller) {
		cp.Controllers = append(cp.Controllers, "deployment-controller", "replicaset-controller")
	}
	n.Env = k8senv.Start(tb, cp)
	n.clients(tb)
	if opts.Helm {
		shareMount(tb, n.KubeletRoot)
		shareMount(tb, n.stateDir)
	} else {
		n.installKeymount(tb, opts)
	}

	tb.Cleanup(func() { n.teardown(tb) })
	n.startContainerd(tb)
	n.importImage(tb)
	n.startKubelet(tb, opts)
	if opts.Helm {
		n.installChart(tb, opts)
		return n
	}
	n.StartProvider(tb)
	n.StartDriver(tb)
	n.waitDriverRegistered(tb)
	return n
}

// clients makes the administrator clients.
func (n *Node) clients(tb testing.TB) {
	scheme := k8sruntime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), secretsstorev1.AddToScheme(scheme)); err != nil {
		tb.Fatalf("nodeenv: scheme: %v", err)
	}
	var err error
	if n.Ctrl, err = client.New(n.Env.Config, client.Options{Scheme: scheme}); err != nil {
		tb.Fatalf("nodeenv: client: %v", err)
	}
	if n.Kube, err = kubernetes.NewForConfig(n.Env.Config); err != nil {
		tb.Fatalf("nodeenv: clientset: %v", err)
	}
}

// installKeymount creates what a cluster installing keymount has: the
// shipped RBAC (with the secret-sync component) and CSIDriver object, and
// the driver's credentials.
func (n *Node) installKeymount(tb testing.TB, opts Options) {
	ctx := tb.Context()
	for _, f := range []string{"deploy/rbac.yaml", "deploy/components/secret-sync/rbac.yaml"} {
		for _, obj := range decodeAll(tb, filepath.Join(n.repo, filepath.FromSlash(f))) {
			if err := n.Ctrl.Create(ctx, obj); err != nil {
				tb.Fatalf("nodeenv: create %s %q from %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), f, err)
			}
		}
	}
	objs := decodeAll(tb, filepath.Join(n.repo, "deploy", "csidriver.yaml"))
	if len(objs) != 1 {
		tb.Fatalf("nodeenv: deploy/csidriver.yaml holds %d objects, want 1", len(objs))
	}
	csiDriver := &storagev1.CSIDriver{}
	u, ok := objs[0].(*unstructured.Unstructured)
	if !ok {
		tb.Fatalf("nodeenv: deploy/csidriver.yaml decoded to %T", objs[0])
	}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, csiDriver); err != nil {
		tb.Fatalf("nodeenv: deploy/csidriver.yaml: %v", err)
	}
	for _, a := range opts.TokenAudiences {
		csiDriver.Spec.TokenRequests = append(csiDriver.Spec.TokenRequests, storagev1.TokenRequest{Audience: a})
	}
	if err := n.Ctrl.Create(ctx, csiDriver); err != nil {
		tb.Fatalf("nodeenv: create the CSIDriver: %v", err)
	}
	n.driverKubeconfig, _ = n.Env.KubeconfigFor(tb, driverUser, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"})
}

// PrepareNamespace creates namespace ns with what kube-controller-manager's
// service-account and root-CA controllers would create (this control plane
// runs only the garbage collector): the "default" ServiceAccount and the
// kube-root-ca.crt ConfigMap that every pod's API access volume reads.
func (n *Node) PrepareNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx := t.Context()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: ns},
			Data:       map[string]string{"ca.crt": string(n.Env.Config.CAData)},
		},
	}
	for _, o := range objs {
		if err := n.Ctrl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("nodeenv: create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// waitDriverRegistered waits until kubelet lists the driver on the node's
// CSINode object: kubelet found its registration socket and called
// NodeGetInfo.
func (n *Node) waitDriverRegistered(tb testing.TB) {
	tb.Helper()
	err := poll.Wait(tb.Context(), startTimeout, func(ctx context.Context) (bool, error) {
		csiNode, err := n.Kube.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == DriverName && d.NodeID == n.Name {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		tb.Fatalf("nodeenv: kubelet did not register %s: %v\n%s\n%s", DriverName, err, n.LogTail("keymount-driver"), n.LogTail("kubelet"))
	}
}

// DriverRegistrations counts kubelet's log lines saying it registered the
// driver (one per registration).
func (n *Node) DriverRegistrations(t testing.TB) int {
	t.Helper()
	data, err := os.ReadFile(n.logPath("kubelet"))
	if err != nil {
		t.Fatalf("nodeenv: %v", err)
	}
	return strings.Count(string(data), "Register new plugin with name: "+DriverName)
}

// WaitDriverRegistrations waits until kubelet's log shows at least want
// registrations of the driver.
func (n *Node) WaitDriverRegistrations(t testing.TB, want int) {
	t.Helper()
	err := poll.Wait(t.Context(), startTimeout, func(context.Context) (bool, error) {
		return n.DriverRegistrations(t) >= want, nil
	})
	if err != nil {
		t.Fatalf("nodeenv: kubelet registered the driver %d times, want %d: %v\n%s", n.DriverRegistrations(t), want, err, n.LogTail("kubelet"))
	}
}

// buildBinaries builds the driver, the CLI, the providers and the probe
// (and with opts.Controller keymount-controller), static, stamped with
// ImageVersion.
func (n *Node) buildBinaries(tb testing.TB, opts Options) {
	pkgs := []string{"./cmd/keymount-driver", "./cmd/keymount", "./cmd/keymount-provider-local", "./cmd/keymount-provider-aws",
		"./cmd/keymount-provider-vault", "./tests/node/probe"}
	if opts.Controller {
		pkgs = append(pkgs, "./cmd/keymount-controller")
	}
	goBuild(tb, n.repo, ImageVersion, n.bin, pkgs...)
}

// goBuild builds the packages of the module in repo into the directory
// out, static, with version stamped in (main.version).
func goBuild(tb testing.TB, repo, version, out string, pkgs ...string) {
	tb.Helper()
	cmd := exec.Command(goTool(), append([]string{"build", "-trimpath", "-ldflags=-X=main.version=" + version, "-o", out + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("nodeenv: go build: %v\n%s", err, b)
	}
}

// checkAssets fails unless KUBEBUILDER_ASSETS holds every part of the node.
func checkAssets(tb testing.TB, dir string) {
	tb.Helper()
	const fix = "run `make k8s-env` and set " + k8senv.AssetsEnv + "=$(hack/install-k8s.sh --print-assets-dir), or run the tests through `make test`"
	if dir == "" {
		tb.Fatalf("nodeenv: %s is not set: %s", k8senv.AssetsEnv, fix)
	}
	var missing []string
	for _, b := range []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "cni/loopback"} {
		info, err := os.Stat(filepath.Join(dir, b))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		tb.Fatalf("nodeenv: %s=%s lacks %s: %s", k8senv.AssetsEnv, dir, strings.Join(missing, ", "), fix)
	}
}

// shortTempDir is a new directory directly under /tmp, removed by Start's
// cleanup: unix socket paths under it must stay below 108 bytes.
func shortTempDir(tb testing.TB) string {
	dir, err := sockettest.MkdirTemp("kmnode-")
	if err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	return dir
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func mkdir(tb testing.TB, dir, name string) string {
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil { //nolint:gosec // G301: kubelet and containers traverse the node's directories
		tb.Fatalf("nodeenv: %v", err)
	}
	return p
}

// repoRoot is the directory of the module's go.mod.
func repoRoot(tb testing.TB) string {
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		tb.Fatalf("nodeenv: finding the module root with `go env GOMOD`: %q, %v", gomod, err)
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
