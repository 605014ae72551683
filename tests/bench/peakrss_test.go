package bench_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/harness"
)

// peakRSSTargetMiB is DESIGN.md's target for the driver's peak RSS under
// these loads. It is printed against, never asserted.
const peakRSSTargetMiB = 160

// benchNode is the node name of the benchmarks' drivers.
const benchNode = "bench-node"

// kubeletTimeout is kubelet's deadline for a NodePublishVolume call.
const kubeletTimeout = 2 * time.Minute

// rssLoad is a burst of concurrent first publishes, each of a new pod whose
// volume holds one object of objectBytes.
type rssLoad struct {
	name        string
	volumes     int
	objectBytes int
}

// BenchmarkPeakRSS runs the real keymount-driver and keymount-provider-local
// binaries, with the DaemonSet's memory flags and Go memory environment
// (deploy/daemonset.yaml; the binary's defaults for what it does not set),
// fires every publish of a load at once through the CSI socket the way
// kubelet does when that many pods land on a node together, then
// unpublishes them all. Every publish must succeed.
//
// Reported per load:
//   - peak-RSS-MiB: the driver's VmHWM after the load (DESIGN.md: under
//     160 MiB), printed with whether it is under the target;
//   - provider-peak-RSS-MiB: the provider's VmHWM, for information;
//   - tmpfs-MiB: what the volumes' tmpfs held with every volume published.
//     Linux charges tmpfs pages to the memory cgroup of the process that
//     wrote them, the driver's container, on top of its RSS;
//   - publishes/s and p50-ms/p99-ms: throughput of the burst and latency of
//     one publish within it (queueing for provider slots included);
//   - ns/op: wall time of one whole burst of publishes.
//
// Each run of the benchmark function starts fresh processes, so VmHWM
// covers exactly that run's b.N bursts.
func BenchmarkPeakRSS(b *testing.B) {
	dir := b.TempDir()
	driverBin, providerBin := buildBinaries(b, dir)
	ds := daemonSetContainer(b)
	env, args := memoryEnv(b, ds), memoryArgs(ds)
	for _, l := range []rssLoad{
		{name: "200x1MiB", volumes: 200, objectBytes: 1 << 20},
		{name: "100x3.5MiB", volumes: 100, objectBytes: 7 << 19},
	} {
		b.Run(l.name, func(b *testing.B) {
			n := startBinNode(b, driverBin, providerBin, env, args, l.objectBytes)
			benchPeakRSS(b, n, l)
			b.Logf("%s: driver run with environment %q and memory flags %q (none: the binary's defaults), as deploy/daemonset.yaml runs it",
				l.name, env, args)
		})
	}
}

func benchPeakRSS(b *testing.B, n *binNode, l rssLoad) {
	ctx := b.Context()
	var latencies []time.Duration
	var tmpfs int64
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		vols, err := n.newVolumes(l.volumes)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		lat, err := n.publishAll(ctx, vols)
		b.StopTimer()
		if err != nil {
			b.Fatalf("%s: %v\ndriver log:\n%s", l.name, err, n.driver.logTail())
		}
		latencies = append(latencies, lat...)
		if tmpfs, err = tmpfsUsed(vols); err != nil {
			b.Fatal(err)
		}
		if err := n.unpublishAll(ctx, vols); err != nil {
			b.Fatalf("%s: %v\ndriver log:\n%s", l.name, err, n.driver.logTail())
		}
	}
	drvKiB := hwmKiB(b, n.driver)
	provKiB := hwmKiB(b, n.provider)
	elapsed := b.Elapsed()
	b.ReportMetric(mib(drvKiB<<10), "peak-RSS-MiB")
	b.ReportMetric(mib(provKiB<<10), "provider-peak-RSS-MiB")
	b.ReportMetric(mib(tmpfs), "tmpfs-MiB")
	b.ReportMetric(float64(b.N*l.volumes)/elapsed.Seconds(), "publishes/s")
	b.ReportMetric(ms(percentile(latencies, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(latencies, 99)), "p99-ms")
	verdict := "under"
	if mib(drvKiB<<10) >= peakRSSTargetMiB {
		verdict = "NOT under"
	}
	b.Logf("%s (b.N=%d): driver peak RSS (VmHWM) %.1f MiB, %s the %d MiB target; provider %.1f MiB; "+
		"volume tmpfs %.1f MiB on top, charged to the driver's memory cgroup",
		l.name, b.N, mib(drvKiB<<10), verdict, peakRSSTargetMiB, mib(provKiB<<10), mib(tmpfs))
}

// binNode is the driver and the local provider running as binaries over a
// temporary directory.
type binNode struct {
	dir, kubelet string
	// The driver's binary, environment and arguments, to start it again.
	driverBin             string
	driverEnv, driverArgs []string
	driver, provider      *child
	conn                  *grpc.ClientConn
	node                  csi.NodeClient
}

// binNodeConfig is what a binNode runs: the binaries, the driver's
// environment and extra flags, the provider's objects, and where classes
// come from.
type binNodeConfig struct {
	driverBin, providerBin string
	env, args              []string
	// objects are the local provider's objects, by name.
	objects map[string][]byte
	// classFile, when set, is a SecretProviderClass manifest the driver
	// reads with --class-path; otherwise args must name an API server.
	classFile string
	// providerArgs are added to the local provider's arguments.
	providerArgs []string
}

// startBinNode starts the local provider serving one object of objectBytes
// random bytes, named by the class benchClass, and the driver reading that
// class from a file, and registers their clean-up.
func startBinNode(b *testing.B, driverBin, providerBin string, env, args []string, objectBytes int) *binNode {
	b.Helper()
	return startBinNodeWith(b, binNodeConfig{
		driverBin: driverBin, providerBin: providerBin, env: env, args: args,
		objects:   map[string][]byte{"blob": randomBytes(objectBytes)},
		classFile: blobClass,
	})
}

// startBinNodeWith starts the local provider and the driver of cfg and
// registers their clean-up.
func startBinNodeWith(b *testing.B, cfg binNodeConfig) *binNode {
	b.Helper()
	// Short: unix socket paths are limited to 107 bytes.
	dir, err := sockettest.MkdirTemp("kmrss")
	if err != nil {
		b.Fatal(err)
	}
	n := &binNode{dir: dir, kubelet: filepath.Join(dir, "kubelet")}
	b.Cleanup(func() {
		if err := n.stop(); err != nil {
			b.Error(err)
		}
	})
	root, classes, providers, state := filepath.Join(dir, "root"), filepath.Join(dir, "classes"),
		filepath.Join(dir, "providers"), filepath.Join(dir, "state")
	for _, d := range []string{root, classes, providers, state, n.kubelet} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			b.Fatal(err)
		}
	}
	for name, data := range cfg.objects {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	args := []string{
		"--endpoint=unix://" + filepath.Join(dir, "csi.sock"), "--node-id=" + benchNode, "--provider-dir=" + providers,
		"--additional-provider-dirs=", "--state-dir=" + state, "--kubelet-root-dir=" + n.kubelet,
		// Metrics on, as the DaemonSet runs the driver, on loopback only.
		"--metrics-addr=127.0.0.1:" + strconv.Itoa(freePort(b)),
	}
	if cfg.classFile != "" {
		if err := os.WriteFile(filepath.Join(classes, benchClass+".yaml"), []byte(cfg.classFile), 0o600); err != nil {
			b.Fatal(err)
		}
		args = append(args, "--class-path="+classes)
	}
	n.provider, err = startChild("keymount-provider-local", filepath.Join(dir, "provider.log"), cfg.providerBin, nil,
		append([]string{"--root=" + root, "--provider-dir=" + providers, "--name=" + harness.ProviderName}, cfg.providerArgs...)...)
	if err != nil {
		b.Fatal(err)
	}
	if err := waitForFile(filepath.Join(providers, harness.ProviderName+".sock"), n.provider); err != nil {
		b.Fatal(err)
	}
	if err := n.startDriver(cfg.driverBin, cfg.env, append(args, cfg.args...)); err != nil {
		b.Fatal(err)
	}
	return n
}

// startDriver starts the driver binary and waits until it is ready.
func (n *binNode) startDriver(bin string, env, args []string) error {
	n.driverBin, n.driverEnv, n.driverArgs = bin, env, args
	sock := filepath.Join(n.dir, "csi.sock")
	var err error
	n.driver, err = startChild("keymount-driver", filepath.Join(n.dir, "driver.log"), bin, env, args...)
	if err != nil {
		return err
	}
	if err := waitForFile(sock, n.driver); err != nil {
		return err
	}
	if n.conn, err = harness.Dial(sock); err != nil {
		return err
	}
	if err := waitReady(n.conn, n.driver); err != nil {
		return err
	}
	n.node = csi.NewNodeClient(n.conn)
	return nil
}

// blobClass is the class benchClass mounting the provider's object "blob".
const blobClass = `apiVersion: secrets-store.csi.x-k8s.io/v1
kind: SecretProviderClass
metadata:
  name: ` + benchClass + `
spec:
  provider: ` + harness.ProviderName + `
  parameters:
    objects: |
      - objectName: blob
`

func (n *binNode) stop() error {
	var errs []error
	if n.conn != nil {
		errs = append(errs, n.conn.Close())
	}
	if n.driver != nil {
		errs = append(errs, n.driver.stop())
	}
	if n.provider != nil {
		errs = append(errs, n.provider.stop())
	}
	errs = append(errs, unmountAndRemove(n.dir))
	return errors.Join(errs...)
}

// newVolumes makes up count pods, one volume each, named and laid out the
// way kubelet does: the target's parent exists, the target does not.
func (n *binNode) newVolumes(count int) ([]harness.Volume, error) {
	vols := make([]harness.Volume, count)
	for i := range vols {
		uid := newUID()
		v := harness.Volume{
			Pod: harness.Pod{
				Name: "app-" + uid[:8], Namespace: "default", UID: uid, ServiceAccount: "default",
			},
			Name:   "secrets",
			ID:     harness.VolumeID(uid, "secrets"),
			Target: filepath.Join(n.kubelet, "pods", uid, "volumes", "kubernetes.io~csi", "secrets", "mount"),
		}
		if err := os.MkdirAll(filepath.Dir(v.Target), 0o750); err != nil {
			return nil, err
		}
		vols[i] = v
	}
	return vols, nil
}

// publishRequest is the NodePublishVolume request kubelet sends for an
// inline volume with the CSIDriver's podInfoOnMount.
func publishRequest(v harness.Volume) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   v.ID,
		TargetPath: v.Target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		Readonly: true,
		VolumeContext: map[string]string{
			driver.AttrClass:          benchClass,
			driver.AttrPodName:        v.Pod.Name,
			driver.AttrPodNamespace:   v.Pod.Namespace,
			driver.AttrPodUID:         v.Pod.UID,
			driver.AttrServiceAccount: v.Pod.ServiceAccount,
			driver.AttrEphemeral:      "true",
		},
	}
}

// publishAll publishes every volume at once, each from its own goroutine
// with kubelet's deadline, and returns each call's latency; any failure is
// an error.
func (n *binNode) publishAll(ctx context.Context, vols []harness.Volume) ([]time.Duration, error) {
	lat := make([]time.Duration, len(vols))
	err := n.all(vols, func(i int, v harness.Volume) error {
		ctx, cancel := context.WithTimeout(ctx, kubeletTimeout)
		defer cancel()
		start := time.Now()
		_, err := n.node.NodePublishVolume(ctx, publishRequest(v))
		lat[i] = time.Since(start)
		return err
	})
	return lat, err
}

// unpublishAll unpublishes every volume at once.
func (n *binNode) unpublishAll(ctx context.Context, vols []harness.Volume) error {
	return n.all(vols, func(_ int, v harness.Volume) error {
		ctx, cancel := context.WithTimeout(ctx, kubeletTimeout)
		defer cancel()
		_, err := n.node.NodeUnpublishVolume(ctx, harness.UnpublishRequest(v.ID, v.Target))
		return err
	})
}

// all runs call for every volume, each in its own goroutine, released
// together, and reports how many failed and the first few errors.
func (n *binNode) all(vols []harness.Volume, call func(int, harness.Volume) error) error {
	errs := make([]error, len(vols))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, v := range vols {
		wg.Go(func() {
			<-start
			errs[i] = call(i, v)
		})
	}
	close(start)
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("volume %s: %v", vols[i].ID, err))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d calls failed, first: %s", len(failed), len(vols), strings.Join(failed[:min(3, len(failed))], "; "))
}

// tmpfsUsed sums what the tmpfs behind each volume's target holds.
func tmpfsUsed(vols []harness.Volume) (int64, error) {
	var sum int64
	for _, v := range vols {
		var st unix.Statfs_t
		if err := unix.Statfs(v.Target, &st); err != nil {
			return 0, fmt.Errorf("statfs %s: %w", v.Target, err)
		}
		sum += int64(st.Blocks-st.Bfree) * st.Bsize
	}
	return sum, nil
}

func hwmKiB(b *testing.B, c *child) int64 {
	b.Helper()
	kib, err := statusKiB(c.cmd.Process.Pid, "VmHWM")
	if err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
	return kib
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// newUID returns a random version 4 UUID, like a pod UID.
func newUID() string {
	p := randomBytes(16)
	p[6] = p[6]&0x0f | 0x40
	p[8] = p[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", p[0:4], p[4:6], p[6:8], p[8:10], p[10:16])
}
