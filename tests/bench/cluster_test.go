package bench_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/tests/harness"
	"github.com/keymount/keymount/tests/k8senv"
)

// The cluster benchmarks run the real keymount-driver binary against a real
// kube-apiserver (and etcd), with pod statuses on, as a node does: every
// first publish of a pod creates its SecretProviderClassPodStatus and every
// unpublish deletes it, from the driver's own queue after kubelet has its
// answer. The class mounts clusterObjects objects of objectSize bytes from
// the local provider binary.

// clusterObjects is how many objects the benchmark class mounts.
const clusterObjects = 10

// benchNamespace holds the benchmarks' pods and classes.
const benchNamespace = "default"

// convergeTimeout bounds the wait for the driver's asynchronous API writes
// to catch up after a load: a bound that only fails a stuck benchmark.
const convergeTimeout = 3 * time.Minute

// clusterNode is a binNode whose driver reports to a real API server.
type clusterNode struct {
	*binNode
	env  *k8senv.Env
	kube kubernetes.Interface
	ctrl client.Client
	// pprofURL is the driver's pprof address, empty when not enabled.
	pprofURL string
}

// startClusterNode starts etcd and kube-apiserver with keymount's CRDs, the
// benchmark class in the API, the local provider and the driver (the
// DaemonSet's memory settings, --kubeconfig of an administrator), and
// registers their clean-up.
func startClusterNode(b *testing.B, driverBin, providerBin string, pprof bool, extraArgs ...string) *clusterNode {
	b.Helper()
	return startClusterNodeWith(b, driverBin, providerBin, pprof, nil, extraArgs...)
}

// startClusterNodeWith is startClusterNode with arguments for the provider.
func startClusterNodeWith(b *testing.B, driverBin, providerBin string, pprof bool, providerArgs []string, extraArgs ...string) *clusterNode {
	b.Helper()
	// Own control plane: a benchmark measures against a control plane loaded by nothing else.
	env := k8senv.Start(b, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}})
	kubeconfig, cfg := env.KubeconfigFor(b, "keymount-bench", []string{"system:masters"})
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	scheme, err := benchScheme()
	if err != nil {
		b.Fatal(err)
	}
	ctrl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	objects := map[string][]byte{}
	names := make([]string, clusterObjects)
	for i := range names {
		names[i] = fmt.Sprintf("object-%02d", i)
		objects[names[i]] = randomBytes(objectSize)
	}
	if err := ctrl.Create(b.Context(), benchSPC(benchClass, names)); err != nil {
		b.Fatalf("create the class: %v", err)
	}
	ds := daemonSetContainer(b)
	// Sync off, as the shipped DaemonSet without the secret-sync
	// component: the benchmark's administrator could sync (auto would).
	args := append(append([]string{"--kubeconfig=" + kubeconfig, "--sync-secrets=false"}, memoryArgs(ds)...), extraArgs...)
	n := &clusterNode{env: env, kube: kube, ctrl: ctrl}
	if pprof {
		port := freePort(b)
		args = append(args, "--enable-pprof", "--pprof-port="+strconv.Itoa(port))
		n.pprofURL = "http://127.0.0.1:" + strconv.Itoa(port)
	}
	n.binNode = startBinNodeWith(b, binNodeConfig{
		driverBin: driverBin, providerBin: providerBin, env: memoryEnv(b, ds), args: args, objects: objects,
		providerArgs: providerArgs,
	})
	return n
}

func benchSPC(name string, objects []string) *secretsstorev1.SecretProviderClass {
	return &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider:   harness.ProviderName,
			Parameters: map[string]string{"objects": harness.ObjectsYAML(objects...)},
		},
	}
}

// newPods creates count pods bound to the benchmark node, each with an
// inline volume of class, and returns their volumes as kubelet names them.
func (n *clusterNode) newPods(b *testing.B, count int, class string) []harness.Volume {
	b.Helper()
	vols := make([]harness.Volume, count)
	err := parallel(count, 16, func(i int) error {
		name := fmt.Sprintf("app-%s", newUID()[:13])
		pod, err := n.kube.CoreV1().Pods(benchNamespace).Create(context.Background(), benchPod(name, benchNode, class), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		uid := string(pod.UID)
		vols[i] = harness.Volume{
			Pod:    harness.Pod{Name: pod.Name, Namespace: pod.Namespace, UID: uid, ServiceAccount: "default"},
			Name:   "secrets",
			ID:     harness.VolumeID(uid, "secrets"),
			Target: filepath.Join(n.kubelet, "pods", uid, "volumes", "kubernetes.io~csi", "secrets", "mount"),
		}
		return os.MkdirAll(filepath.Dir(vols[i].Target), 0o750)
	})
	if err != nil {
		b.Fatalf("create %d pods: %v", count, err)
	}
	return vols
}

// benchPod is a pod on node with one inline secrets-store volume of class.
func benchPod(name, node, class string) *corev1.Pod {
	readOnly := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.invalid/app:1",
				VolumeMounts: []corev1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "secrets-store.csi.k8s.io", ReadOnly: &readOnly,
				VolumeAttributes: map[string]string{"secretProviderClass": class},
			}}}},
		},
	}
}

// publishRequestOf is kubelet's request for v with class.
func publishRequestOf(v harness.Volume, class string) *csi.NodePublishVolumeRequest {
	req := publishRequest(v)
	req.VolumeContext[driver.AttrClass] = class
	return req
}

func benchScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	return s, errors.Join(clientgoscheme.AddToScheme(s), secretsstorev1.AddToScheme(s))
}

// statuses counts the pod statuses in the benchmark namespace.
func (n *clusterNode) statuses(ctx context.Context) (int, error) {
	var list secretsstorev1.SecretProviderClassPodStatusList
	if err := n.ctrl.List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// waitStatuses waits until the driver's queue has written exactly want pod
// statuses: one per published volume, none for an unpublished one.
func (n *clusterNode) waitStatuses(b *testing.B, want int) {
	b.Helper()
	got := -1
	err := wait.PollUntilContextTimeout(b.Context(), 20*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = n.statuses(ctx)
		return err == nil && got == want, nil
	})
	if err != nil {
		b.Fatalf("pod statuses: %d, want %d after %s: the driver's API writes did not catch up: %v\n%s",
			got, want, convergeTimeout, err, n.driver.logTail())
	}
}

// BenchmarkClusterPublish measures NodePublishVolume and NodeUnpublishVolume
// through the real driver's CSI socket with the API server on (pod statuses
// written): 10 objects of 4 KiB a volume, pods that exist in the API.
//
//   - first: one first publish at a time, the pod created beforehand
//     (untimed); p50-ms/p99-ms over every publish of the run;
//   - 200-back-to-back: one op is 200 first publishes in a row;
//   - 32-concurrent: one op is 640 first publishes by 32 callers at once;
//     publishes/s is sustained throughput, every call must succeed;
//   - unpublish: one unpublish of a published volume at a time.
//
// Every case then waits (untimed) until the pod statuses in the API are
// exactly those of the published volumes, and none after the unpublishes:
// the writes are asynchronous, never lost.
func BenchmarkClusterPublish(b *testing.B) {
	dir := b.TempDir()
	driverBin, providerBin := buildBinaries(b, dir)
	n := startClusterNode(b, driverBin, providerBin, false)
	b.Run("first", func(b *testing.B) {
		var lat []time.Duration
		var vols []harness.Volume
		for range b.N {
			b.StopTimer()
			v := n.newPods(b, 1, benchClass)[0]
			b.StartTimer()
			start := time.Now()
			if _, err := n.node.NodePublishVolume(b.Context(), publishRequest(v)); err != nil {
				b.Fatalf("NodePublishVolume: %v", err)
			}
			lat = append(lat, time.Since(start))
			vols = append(vols, v)
		}
		b.StopTimer()
		reportLatency(b, lat)
		n.settle(b, vols)
	})
	b.Run("200-back-to-back", func(b *testing.B) {
		var lat []time.Duration
		for range b.N {
			b.StopTimer()
			vols := n.newPods(b, 200, benchClass)
			b.StartTimer()
			for _, v := range vols {
				start := time.Now()
				if _, err := n.node.NodePublishVolume(b.Context(), publishRequest(v)); err != nil {
					b.Fatalf("NodePublishVolume: %v", err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			n.settle(b, vols)
		}
		reportLatency(b, lat)
	})
	b.Run("32-concurrent", func(b *testing.B) {
		const callers, total = 32, 640
		var lat []time.Duration
		var busy time.Duration
		for range b.N {
			b.StopTimer()
			vols := n.newPods(b, total, benchClass)
			l := make([]time.Duration, total)
			b.StartTimer()
			start := time.Now()
			err := parallel(total, callers, func(i int) error {
				t := time.Now()
				_, err := n.node.NodePublishVolume(b.Context(), publishRequest(vols[i]))
				l[i] = time.Since(t)
				return err
			})
			busy += time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatalf("publishes by %d callers: %v", callers, err)
			}
			lat = append(lat, l...)
			n.settle(b, vols)
		}
		reportLatency(b, lat)
		b.ReportMetric(float64(b.N*total)/busy.Seconds(), "publishes/s")
	})
	b.Run("unpublish", func(b *testing.B) {
		var lat []time.Duration
		for range b.N {
			b.StopTimer()
			v := n.newPods(b, 1, benchClass)[0]
			if _, err := n.node.NodePublishVolume(b.Context(), publishRequest(v)); err != nil {
				b.Fatalf("NodePublishVolume: %v", err)
			}
			b.StartTimer()
			start := time.Now()
			if _, err := n.node.NodeUnpublishVolume(b.Context(), harness.UnpublishRequest(v.ID, v.Target)); err != nil {
				b.Fatalf("NodeUnpublishVolume: %v", err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		reportLatency(b, lat)
		n.waitStatuses(b, 0)
	})
}

// publishBy publishes vols by callers callers at once, volume i with class
// classOf(i) (nil: the benchmark class), and fails the benchmark if any
// call fails.
func (n *binNode) publishBy(b *testing.B, callers int, vols []harness.Volume, classOf func(int) string) {
	b.Helper()
	ctx := b.Context()
	err := parallel(len(vols), callers, func(i int) error {
		req := publishRequest(vols[i])
		if classOf != nil {
			req = publishRequestOf(vols[i], classOf(i))
		}
		_, err := n.node.NodePublishVolume(ctx, req)
		return err
	})
	if err != nil {
		b.Fatalf("publish %d volumes: %v", len(vols), err)
	}
}

// settle waits until every volume of vols has its pod status, then
// unpublishes them all and waits until the statuses are gone.
func (n *clusterNode) settle(b *testing.B, vols []harness.Volume) {
	b.Helper()
	n.waitStatuses(b, len(vols))
	if err := n.unpublishAll(b.Context(), vols); err != nil {
		b.Fatal(err)
	}
	n.waitStatuses(b, 0)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
}

// parallel runs f(0..count-1) on workers goroutines and returns the first
// few errors, with how many calls failed.
func parallel(count, workers int, f func(int) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	failed := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					failed++
					if len(errs) < 3 {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if failed > 0 {
		return fmt.Errorf("%d of %d calls failed: %w", failed, count, errors.Join(errs...))
	}
	return nil
}

func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		b.Fatalf("listener address %v is not TCP", l.Addr())
	}
	port := addr.Port
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return port
}
