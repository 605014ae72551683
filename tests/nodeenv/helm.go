package nodeenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/keymount/keymount/internal/ociimage"
	"github.com/keymount/keymount/tests/poll"
)

// What a node started with Options.Helm runs: the chart in
// deploy/charts/keymount installed with Helm (the SDK behind the helm CLI)
// as release Release in ReleaseNamespace, its driver and local provider
// DaemonSets running as real pods from images packed from the work tree
// (internal/ociimage, as `make image` packs them) and imported into
// containerd under ImageRegistry.
const (
	Release          = "keymount"
	ReleaseNamespace = "kube-system"
	// ImageRegistry names the images the Helm node imports; nothing is
	// pulled (pullPolicy Never).
	ImageRegistry = "keymount.test"
	// ImageVersion is the version stamped into the first images and their
	// tag.
	ImageVersion = "node-tier"
	// driverContainer is the driver's container in the chart's DaemonSet.
	driverContainer = "secrets-store"
)

// helmState is what the Helm node keeps between install, upgrades and
// uninstall.
type helmState struct {
	cfg         *action.Configuration
	chart       *chart.Chart
	values      map[string]any
	logs        *logCollector
	stopLogs    context.CancelFunc
	uninstalled bool
}

// shareMount makes dir a shared mount point (a bind mount of itself), as /
// is on a systemd host: kubelet's Bidirectional mount propagation, which
// the chart's driver uses for the pods' and its own state directories,
// needs the host path on a shared mount (containerd refuses it otherwise).
// teardown detaches it with every other mount under the root.
func shareMount(tb testing.TB, dir string) {
	tb.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		tb.Fatalf("nodeenv: bind-mounting %s onto itself: %v", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		tb.Fatalf("nodeenv: making %s a shared mount: %v", dir, err)
	}
}

// chartValues are the values the Helm node installs the chart with: the
// node's directories, the images imported for version, everything on the
// host's network on 127.0.0.1 (the node has no pod network and no
// kube-proxy: the driver reaches the API server at its loopback address),
// secret sync and kubelet-paced rotation on, the highest log level.
func (n *Node) chartValues(tb testing.TB, version string, opts Options) map[string]any {
	apiServer := n.Env.Config.Host
	hostPort := strings.TrimPrefix(apiServer, "https://")
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		tb.Fatalf("nodeenv: the API server's address %q: %v", apiServer, err)
	}
	var tokenRequests []any
	for _, a := range opts.TokenAudiences {
		tokenRequests = append(tokenRequests, map[string]any{"audience": a})
	}
	image := func(name string) map[string]any {
		return map[string]any{"repository": ImageRegistry + "/" + name, "tag": version, "pullPolicy": "Never"}
	}
	values := map[string]any{
		"linux": map[string]any{
			"image":                   image(ociimage.Driver.Name),
			"kubeletRootDir":          n.KubeletRoot,
			"stateDir":                n.stateDir,
			"providersDir":            n.ProviderDir,
			"additionalProvidersDirs": []any{},
			"hostNetwork":             true,
			"healthPort":              freePort(tb),
			"metricsAddr":             net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(tb))),
			"env": []any{
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": host},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": port},
			},
			"driver": map[string]any{"extraArgs": []any{"--tmpfs-size=4Mi"}},
		},
		"logVerbosity":         10,
		"syncSecret":           map[string]any{"enabled": true},
		"enableSecretRotation": true,
		"rotationPollInterval": "0s",
		"tokenRequests":        tokenRequests,
		"providers": map[string]any{
			"local": map[string]any{
				"enabled":     true,
				"image":       image(ociimage.ProviderLocal.Name),
				"hostNetwork": true,
				"hostPath":    n.ProviderRoot,
				"extraArgs":   []any{driverVerbosity},
			},
		},
	}
	if opts.Controller {
		values["restartOnChange"] = map[string]any{"enabled": true}
		values["controller"] = map[string]any{
			"enabled":              true,
			"image":                image(ociimage.Controller.Name),
			"replicas":             1,
			"hostNetwork":          true,
			"metricsPort":          freePort(tb),
			"healthPort":           freePort(tb),
			"rotationPollInterval": "0s",
			// The node keeps the not-ready taint TaintNodesByCondition puts
			// on every new Node (no node lifecycle controller runs): the
			// DaemonSets tolerate it by default, a Deployment must say so.
			"tolerations":  []any{map[string]any{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}},
			"logVerbosity": 5,
			"env": []any{
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": host},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": port},
			},
		}
	}
	return values
}

// mergeValues merges over into dst, maps key by key, anything else
// replaced, and returns dst.
func mergeValues(dst, over map[string]any) map[string]any {
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeValues(dm, vm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// installChart packs and imports the images, installs the chart and waits
// until its DaemonSets run, the local provider serves and kubelet
// registered the driver.
func (n *Node) installChart(tb testing.TB, opts Options) {
	tb.Helper()
	n.PrepareNamespace(tb, ReleaseNamespace)
	programs := []ociimage.Program{ociimage.Driver, ociimage.ProviderLocal}
	if opts.Controller {
		programs = append(programs, ociimage.Controller)
	}
	n.importImages(tb, ImageVersion, n.bin, programs...)
	kubeconfig, _ := n.Env.KubeconfigFor(tb, "helm", []string{"system:masters"})
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	ns := ReleaseNamespace
	flags.Namespace = &ns
	h := &helmState{cfg: &action.Configuration{}}
	if err := h.cfg.Init(flags, ReleaseNamespace, "secret", tb.Logf); err != nil {
		tb.Fatalf("nodeenv: helm: %v", err)
	}
	var err error
	if h.chart, err = loader.Load(filepath.Join(n.repo, "deploy", "charts", "keymount")); err != nil {
		tb.Fatalf("nodeenv: loading the chart: %v", err)
	}
	h.values = mergeValues(n.chartValues(tb, ImageVersion, opts), opts.ChartValues)
	ctx, cancel := context.WithCancel(context.Background())
	h.logs, h.stopLogs = newLogCollector(n.podLogs, filepath.Join(n.logDir, "pods")), cancel
	go h.logs.run(ctx)
	n.helm = h

	install := action.NewInstall(h.cfg)
	install.ReleaseName, install.Namespace = Release, ReleaseNamespace
	if _, err := install.RunWithContext(tb.Context(), h.chart, h.values); err != nil {
		tb.Fatalf("nodeenv: helm install: %v", err)
	}
	n.WaitRollout(tb)
	n.waitDial(tb, filepath.Join(n.ProviderDir, "local.sock"))
	n.waitDriverRegistered(tb)
	if opts.Controller {
		n.WaitDeployment(tb, ReleaseNamespace, Release+"-controller")
	}
}

// WaitDeployment waits until the Deployment namespace/name runs its current
// template alone: every replica updated and available, no older one left.
func (n *Node) WaitDeployment(tb testing.TB, namespace, name string) *appsv1.Deployment {
	tb.Helper()
	var last *appsv1.Deployment
	err := poll.Wait(tb.Context(), PodTimeout, func(ctx context.Context) (bool, error) {
		d, err := n.Kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d
		s, want := d.Status, int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return s.ObservedGeneration >= d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
			s.AvailableReplicas == want && s.ReadyReplicas == want, nil
	})
	if err != nil {
		status := "(none)"
		if last != nil {
			status = fmt.Sprintf("%+v", last.Status)
		}
		tb.Fatalf("nodeenv: Deployment %s/%s did not roll out: %v\nstatus: %s\n%s", namespace, name, err, status, n.LogTail("kubelet"))
	}
	return last
}

// HelmUpgrade builds the driver's image again with version stamped in,
// imports it and runs `helm upgrade` to it with the same values; it returns
// once the DaemonSet runs the new image alone and kubelet registered the
// new driver.
func (n *Node) HelmUpgrade(t testing.TB, version string) {
	t.Helper()
	bin := mkdir(t, n.Root, "bin-"+version)
	var pkgs []string
	for _, b := range ociimage.Driver.Bins {
		pkgs = append(pkgs, "./cmd/"+b)
	}
	goBuild(t, n.repo, version, bin, pkgs...)
	n.importImages(t, version, bin, ociimage.Driver)
	registered := n.DriverRegistrations(t)
	linux, _ := n.helm.values["linux"].(map[string]any)
	image, _ := linux["image"].(map[string]any)
	image["tag"] = version
	upgrade := action.NewUpgrade(n.helm.cfg)
	upgrade.Namespace = ReleaseNamespace
	if _, err := upgrade.RunWithContext(t.Context(), Release, n.helm.chart, n.helm.values); err != nil {
		t.Fatalf("nodeenv: helm upgrade to %s: %v", version, err)
	}
	n.WaitRollout(t)
	n.WaitDriverRegistrations(t, registered+1)
}

// HelmUninstall runs `helm uninstall` and waits until every pod of the
// release is gone from the node.
func (n *Node) HelmUninstall(t testing.TB) {
	t.Helper()
	if _, err := action.NewUninstall(n.helm.cfg).Run(Release); err != nil {
		t.Fatalf("nodeenv: helm uninstall: %v", err)
	}
	n.helm.uninstalled = true
	err := poll.Wait(t.Context(), PodTimeout, func(ctx context.Context) (bool, error) {
		pods, err := n.Kube.CoreV1().Pods(ReleaseNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("nodeenv: the release's pods are still on the node after helm uninstall: %v\n%s", err, n.LogTail("kubelet"))
	}
	n.helm.logs.collect() // the last lines of the stopped containers
}

// WaitRollout waits until every DaemonSet in ReleaseNamespace runs its
// current template on the node, available, with no older pod left.
func (n *Node) WaitRollout(t testing.TB) {
	t.Helper()
	var state string
	err := poll.Wait(t.Context(), PodTimeout, func(ctx context.Context) (bool, error) {
		list, err := n.Kube.AppsV1().DaemonSets(ReleaseNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(list.Items) == 0 {
			state = "no DaemonSet"
			return false, nil
		}
		for i := range list.Items {
			done, why, err := n.rolledOut(ctx, &list.Items[i])
			if err != nil || !done {
				state = why
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("nodeenv: the chart's DaemonSets did not roll out: %v (%s)\n%s\n%s", err, state, n.LogTail("kube-scheduler"), n.LogTail("kubelet"))
	}
}

// rolledOut reports whether ds runs its current template alone on the
// node, and if not, why.
func (n *Node) rolledOut(ctx context.Context, ds *appsv1.DaemonSet) (bool, string, error) {
	s := ds.Status
	if s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled != 1 || s.UpdatedNumberScheduled != 1 || s.NumberAvailable != 1 {
		return false, fmt.Sprintf("DaemonSet %s: %+v", ds.Name, s), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return false, "", err
	}
	pods, err := n.Kube.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return false, "", err
	}
	if len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil || !Running(&pods.Items[0]) {
		return false, fmt.Sprintf("DaemonSet %s has %d pods", ds.Name, len(pods.Items)), nil
	}
	return true, "", nil
}

// DriverPod is the running pod of the chart's node DaemonSet.
func (n *Node) DriverPod(t testing.TB) *corev1.Pod {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "keymount", "app.kubernetes.io/component": "node"})
	pods, err := n.Kube.CoreV1().Pods(ReleaseNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatalf("nodeenv: %v", err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	if len(out) != 1 {
		t.Fatalf("nodeenv: %d driver pods, want 1", len(out))
	}
	return &out[0]
}

// importImages packs programs from the binaries in bin as
// ImageRegistry/<name>:version and imports them into containerd.
func (n *Node) importImages(tb testing.TB, version, bin string, programs ...ociimage.Program) {
	tb.Helper()
	for _, p := range programs {
		img, err := p.Build("linux", runtime.GOARCH, version, bin, nil)
		if err != nil {
			tb.Fatalf("nodeenv: %v", err)
		}
		n.importArchive(tb, ImageRegistry+"/"+p.Name+":"+version, img)
	}
}

// waitDial waits until something serves on the unix socket path.
func (n *Node) waitDial(tb testing.TB, path string) {
	tb.Helper()
	err := poll.Wait(tb.Context(), startTimeout, func(context.Context) (bool, error) {
		return serves(path), nil
	})
	if err != nil {
		tb.Fatalf("nodeenv: nothing serves %s: %v", path, err)
	}
}

// logCollector copies the logs kubelet keeps of the release's containers
// into the node's log directory as they grow: kubelet removes a container's
// log soon after the pod is deleted (an upgrade, the uninstall), and the
// log scanner must see every line the driver ever wrote. Each pass appends
// only what a log gained since the last.
type logCollector struct {
	from, to string
	mu       sync.Mutex
	copied   map[string]int64 // bytes of each log copied so far; guarded by mu
}

func newLogCollector(from, to string) *logCollector {
	return &logCollector{from: from, to: to, copied: map[string]int64{}}
}

// run collects until ctx ends.
func (c *logCollector) run(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.collect()
		}
	}
}

// collect appends what every log of a container of ReleaseNamespace
// (<podLogs>/<namespace>_<pod>_<uid>/<container>/<n>.log) gained to
// <to>/<pod>_<container>_<n>.log. A log that shrank (kubelet rotated it)
// is appended from its start: the copy keeps the lines before.
func (c *logCollector) collect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	files, _ := filepath.Glob(filepath.Join(c.from, ReleaseNamespace+"_*", "*", "*.log"))
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil || info.Size() == c.copied[f] {
			continue
		}
		podDir := strings.SplitN(filepath.Base(filepath.Dir(filepath.Dir(f))), "_", 3)
		if len(podDir) != 3 {
			continue
		}
		from := c.copied[f]
		if info.Size() < from {
			from = 0
		}
		name := podDir[1] + "_" + filepath.Base(filepath.Dir(f)) + "_" + filepath.Base(f)
		// What was appended counts even when the copy broke off: the next
		// pass goes on from there.
		n, _ := appendFrom(f, from, filepath.Join(c.to, name))
		c.copied[f] = from + n
	}
}

// newestDriverLog is the copy of the driver container's log written last
// (the running driver's), for LogPath("keymount-driver") and LogTail.
func (c *logCollector) newestDriverLog() string {
	c.collect()
	files, _ := filepath.Glob(filepath.Join(c.to, "*.log"))
	newest, at := filepath.Join(c.to, "no-driver-log-yet.log"), time.Time{}
	for _, f := range files {
		if info, err := os.Stat(f); err == nil && IsDriverLog(f) && info.ModTime().After(at) {
			newest, at = f, info.ModTime()
		}
	}
	return newest
}

// appendFrom appends the file from, read from offset on, to the file to and
// returns how many bytes it appended.
func appendFrom(from string, offset int64, to string) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
		return 0, err
	}
	src, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer func() { _ = src.Close() }()
	if _, err := src.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// IsDriverLog reports whether the log file path (one of LogFiles) is the
// driver's: the host process's, or a copy of the chart's driver container's.
func IsDriverLog(path string) bool {
	base := filepath.Base(path)
	return base == "keymount-driver.log" || strings.Contains(base, "_"+driverContainer+"_")
}
