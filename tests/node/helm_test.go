package node_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// TestHelmChartOnTheNode installs keymount as a cluster would, on a node
// of its own: `helm install` of deploy/charts/keymount, the driver and the
// local provider running as DaemonSet pods (privileged, Bidirectional
// mount propagation, the driver's identity the chart's ServiceAccount and
// RBAC) from images packed as `make image` packs them. A workload pod
// mounts its secrets through it and the chart's secret sync works; `helm
// upgrade` to a new driver image keeps the running pod's volume working
// (refreshed by kubelet's republish through the new driver, unpublished by
// it); `helm uninstall` leaves what the chart's README says stays (the
// CRDs and their objects, the host directories, empty) and nothing else:
// no object of the release, no mount, socket or registration on the node.
// Every log, the pods' included, is scanned for the secret values.
func TestHelmChartOnTheNode(t *testing.T) {
	n := nodeenv.Start(t, nodeenv.Options{
		Helm:                 true,
		TokenAudiences:       []string{tokenAudience},
		KubeletSyncFrequency: 5 * time.Second,
		ScanLogs:             forbidden.scan,
		// The driver asks its providers every 5s (2m by default): the
		// hung-provider check sees it not ready while its provider hangs.
		ChartValues: map[string]any{"providerHealthCheckInterval": "5s"},
	})
	ctx := t.Context()
	checkDriverPod(t, n, nodeenv.ImageVersion)

	ns := namespace(t, n)
	v1, v2 := "v1-"+randomHex(8), "v2-"+randomHex(8)
	putObject(t, n, ns+"/dsn", v1)
	localClass(t, n, ns, "db", `
- objectName: `+ns+`/dsn
  objectAlias: dsn
`, &secretsstorev1.SecretObject{
		SecretName: "db-synced",
		Type:       string(corev1.SecretTypeOpaque),
		Data:       []*secretsstorev1.SecretObjectData{{ObjectName: "dsn", Key: "dsn"}},
	})
	app := createPod(t, n, ns, "app", "db", "show", "-follow", mountPath+"/dsn")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, app, "probe", "the value the chart's driver mounted", hasContent("dsn", v1))
	synced := waitFor(t, "the synced Secret", func(ctx context.Context) (*corev1.Secret, error) {
		return n.Kube.CoreV1().Secrets(ns).Get(ctx, "db-synced", metav1.GetOptions{})
	})
	if string(synced.Data["dsn"]) != v1 {
		t.Errorf("the synced Secret holds %d bytes, not the mounted value", len(synced.Data["dsn"]))
	}
	// Kubernetes 1.35 and later know serviceAccountTokenInSecrets: the
	// chart sets it there (its csidriver.yaml asks .Capabilities), kubelet
	// passes the tokens in the secrets field, and the provider still gets
	// them in its attributes; before 1.35 the chart leaves it out.
	csiDriver, err := n.Kube.StorageV1().CSIDrivers().Get(ctx, nodeenv.DriverName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := version.ParseSemantic(n.KubeletVersion(t))
	if err != nil {
		t.Fatal(err)
	}
	s := csiDriver.Spec.ServiceAccountTokenInSecrets
	if want, got := kv.AtLeast(version.MajorMinor(1, 35)), s != nil && *s; got != want {
		t.Errorf("the chart's CSIDriver on Kubernetes %s: serviceAccountTokenInSecrets %v, want set: %v", kv, s, want)
	}
	t.Run("bound token", func(t *testing.T) { checkProviderGetsBoundToken(t, n, ns) })
	t.Run("hung provider restarted", func(t *testing.T) { checkHungProviderHeals(t, n, ns, v1) })
	target := n.TargetPath(app, "secrets")
	volumeDir := n.VolumeStateDir(volumeHandle(t, target))

	// helm upgrade to a new image: the DaemonSet replaces the driver's pod;
	// the running pod keeps its files and gets the next change through the
	// new driver at kubelet's next republish.
	const version2 = nodeenv.ImageVersion + "-2"
	n.HelmUpgrade(t, version2)
	checkDriverPod(t, n, version2)
	// The log scanner sees both drivers' logs: the replaced pod's too.
	var driverLogs []string
	for _, f := range n.LogFiles(t) {
		if info, err := os.Stat(f); err == nil && info.Size() > 0 && nodeenv.IsDriverLog(f) {
			driverLogs = append(driverLogs, filepath.Base(f))
		}
	}
	if len(driverLogs) < 2 {
		t.Errorf("driver logs %v, want the old and the new driver pod's", driverLogs)
	}
	n.WaitLog(t, app, "probe", "the value after the upgrade", hasContent("dsn", v1))
	putObject(t, n, ns+"/dsn", v2)
	n.WaitLog(t, app, "probe", "the new value, brought by the new driver", hasContent("dsn", v2))
	createPod(t, n, ns, "app2", "db", "show", mountPath+"/dsn")
	n.WaitPod(t, ns, "app2", "Running", nodeenv.Running)

	// The new driver unpublishes what the old one published.
	// (The token test's pod went with its provider, in its subtest.)
	for _, name := range []string{"app", "app2"} {
		if err := n.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"app", "app2"} {
		waitGone(t, "pod "+name, func(ctx context.Context) error {
			_, err := n.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	if _, err := os.Stat(volumeDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the volume's state %s after the new driver unpublished it: %v", volumeDir, err)
	}
	// Secret sync's Secret goes with its owners, the pods (the garbage
	// collector), as the chart's README says.
	waitGone(t, "the synced Secret", func(ctx context.Context) error {
		_, err := n.Kube.CoreV1().Secrets(ns).Get(ctx, "db-synced", metav1.GetOptions{})
		return err
	})

	n.HelmUninstall(t)
	checkUninstalled(t, n, ns)
}

// checkDriverPod: the chart's driver pod runs the image of version,
// privileged, as the chart's ServiceAccount, and the driver on the CSI
// socket reports that version.
func checkDriverPod(t *testing.T, n *nodeenv.Node, version string) {
	t.Helper()
	pod := n.DriverPod(t)
	c := pod.Spec.Containers[0]
	if want := nodeenv.ImageRegistry + "/keymount-driver:" + version; c.Image != want {
		t.Errorf("driver container image %q, want %q", c.Image, want)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged || pod.Spec.ServiceAccountName != nodeenv.Release {
		t.Errorf("driver pod: securityContext %+v, serviceAccount %q", c.SecurityContext, pod.Spec.ServiceAccountName)
	}
	conn, err := grpc.NewClient("unix://"+n.CSISocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(t.Context(), &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatalf("GetPluginInfo on the chart's driver: %v", err)
	}
	if info.GetName() != nodeenv.DriverName || info.GetVendorVersion() != version {
		t.Errorf("GetPluginInfo: %q %q, want %q %q", info.GetName(), info.GetVendorVersion(), nodeenv.DriverName, version)
	}
}

// checkUninstalled: after helm uninstall only what the chart's README says
// stays is left: the CRDs with their objects, and on the node the host
// directories the DaemonSets created, empty; no object of the release, no
// driver on the node's CSINode, no mount, socket or volume state.
func checkUninstalled(t *testing.T, n *nodeenv.Node, ns string) {
	t.Helper()
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(n.Env.Config)
	var left []string
	resources, err := n.Kube.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	for _, list := range resources {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") {
				continue
			}
			objs, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + nodeenv.Release})
			if err != nil {
				continue // a resource that cannot be listed by label here (e.g. events' field-only selectors)
			}
			for _, o := range objs.Items {
				left = append(left, r.Kind+" "+o.GetNamespace()+"/"+o.GetName())
			}
		}
	}
	if helmSecrets, err := n.Kube.CoreV1().Secrets(nodeenv.ReleaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"}); err != nil || len(helmSecrets.Items) > 0 {
		t.Errorf("Helm's release records after uninstall: %v, %d", err, len(helmSecrets.Items))
	}
	if _, err := n.Kube.StorageV1().CSIDrivers().Get(ctx, nodeenv.DriverName, metav1.GetOptions{}); err == nil {
		left = append(left, "CSIDriver "+nodeenv.DriverName)
	}
	if len(left) > 0 {
		t.Errorf("helm uninstall left objects of the release: %v", left)
	}
	for _, crd := range []string{"secretproviderclasses.secrets-store.csi.x-k8s.io", "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io"} {
		if _, err := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")).Get(ctx, crd, metav1.GetOptions{}); err != nil {
			t.Errorf("the CRD %s after helm uninstall: %v (the README says it stays)", crd, err)
		}
	}
	if err := n.Ctrl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &secretsstorev1.SecretProviderClass{}); err != nil {
		t.Errorf("the SecretProviderClass after helm uninstall: %v (the README says it stays)", err)
	}

	checkNodeClean(t, n)
}

// checkNodeClean: kubelet no longer lists the driver on the node's CSINode,
// nothing is mounted below the kubelet root's pods or the state directory
// (but the shared bind mount the node itself made), no keymount socket and
// no volume state is left.
func checkNodeClean(t *testing.T, n *nodeenv.Node) {
	t.Helper()
	// kubelet drops the driver from the node once its registration
	// socket is gone.
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		csiNode, err := n.Kube.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == nodeenv.DriverName }), nil
	})
	if err != nil {
		t.Errorf("the node's CSINode still lists %s after helm uninstall: %v", nodeenv.DriverName, err)
	}

	// The node: no mount below the kubelet root or the state directory but
	// the shared bind mounts the node itself made; no socket; no volume.
	for _, dir := range []string{filepath.Join(n.KubeletRoot, "pods"), n.StateDir()} {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Mountpoint != n.StateDir() {
				t.Errorf("after helm uninstall %s is still mounted (%s)", m.Mountpoint, m.FSType)
			}
		}
	}
	_ = filepath.WalkDir(n.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // gone while walking
		}
		if d.IsDir() && (p == filepath.Join(n.Root, "containerd") || p == filepath.Join(n.Root, "control-plane")) {
			return filepath.SkipDir // not keymount's
		}
		if d.Type()&fs.ModeSocket != 0 && isKeymountSocket(n, p) {
			t.Errorf("after helm uninstall the socket %s is left", p)
		}
		return nil
	})
	if entries, err := os.ReadDir(filepath.Join(n.StateDir(), "volumes")); err == nil && len(entries) > 0 {
		t.Errorf("after helm uninstall the state directory holds %d volumes", len(entries))
	}
}

// isKeymountSocket: a socket keymount serves (CSI, registration, provider).
func isKeymountSocket(n *nodeenv.Node, p string) bool {
	for _, dir := range []string{filepath.Dir(n.CSISocket()), filepath.Join(n.KubeletRoot, "plugins_registry"), n.ProviderDir, n.StateDir()} {
		if strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
