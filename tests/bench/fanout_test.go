package bench_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/tests/k8senv"
)

// Scale of the fan-out benchmark; the environment scales it down for a
// quick run.
const (
	// envFanoutNamespaces is the namespaces the source is copied into
	// (default 1,000).
	envFanoutNamespaces = "KEYMOUNT_BENCH_FANOUT_NAMESPACES"
	// envFanoutUnrelated is the unrelated Secrets at the second reading
	// (default 50,000); the first reading is at a fifth of them.
	envFanoutUnrelated = "KEYMOUNT_BENCH_FANOUT_UNRELATED"
	// envFanoutIdle is the idle measurement window (default 30s).
	envFanoutIdle = "KEYMOUNT_BENCH_FANOUT_IDLE"
)

const (
	defaultFanoutNamespaces = 1000
	defaultFanoutUnrelated  = 50000
	// fanoutSourceNS holds the source; it does not match fanoutPattern.
	fanoutSourceNS = "fanout-src"
	fanoutSource   = "wildcard-tls"
	// fanoutPattern is the source's allowed and auto namespaces: every
	// fo-NNNN namespace of the benchmark, nothing else.
	fanoutPattern = "fo-.*"
	// fanoutWorkers is the benchmark's concurrent API requests while it
	// sets the cluster up.
	fanoutWorkers = 32
	// quietCPU is the CPU time the controller may use in quietWindow and
	// still count as done with what it was given.
	quietCPU    = 0.02
	quietWindow = 2 * time.Second
)

// fanoutRun is one run of the fan-out benchmark.
type fanoutRun struct {
	env        *k8senv.Env
	cs         *kubernetes.Clientset
	meta       metadata.Interface
	kubeconfig string
	dir        string
	namespaces int // matching namespaces so far (each gets a copy)
	spread     int // the namespaces created at the start: the unrelated Secrets' homes
	unrelated  int // created so far
	ctrl       *controllerProc
}

// BenchmarkFanout measures keymount-controller's namespace fan-out (issue
// 21, point 4): the real binary with --enable-fanout and the shipped
// Deployment's GOMEMLIMIT and GOGC, one TLS Secret carrying reflector's
// reflection-allowed and reflection-auto-enabled annotations (namespaces
// "fo-.*") copied into $KEYMOUNT_BENCH_FANOUT_NAMESPACES namespaces (1,000),
// in a cluster that also holds a fifth of $KEYMOUNT_BENCH_FANOUT_UNRELATED
// (10,000) and then all of them (50,000) unrelated Secrets, spread over
// those namespaces:
//
//   - copies-s: from the source created to every copy listed (by
//     keymount's copy label);
//   - change-s: from the source's data changed to every copy carrying its
//     new resourceVersion (reflected-version);
//   - idle-cpu-s: the controller's CPU time over $KEYMOUNT_BENCH_FANOUT_IDLE
//     (30s) with nothing changing (target ~0);
//   - unrelated-update-cpu-s: its CPU time while the first 10,000 unrelated
//     Secrets are updated, until it is quiet again;
//   - rss-10k-mib, rss-50k-mib: its VmRSS after the idle window at each
//     reading (targets ≤ 64 MiB, and ≤ +2 MiB between them: rss-growth-mib);
//     rss-50k-anon-mib and rss-50k-file-mib split the second reading into
//     anonymous pages (heap, stacks, runtime) and the binary's own
//     file-backed pages.
//
// One op is the whole scenario: run it with -benchtime 1x.
func BenchmarkFanout(b *testing.B) {
	namespaces := envInt(b, envFanoutNamespaces, defaultFanoutNamespaces)
	unrelated := envInt(b, envFanoutUnrelated, defaultFanoutUnrelated)
	idle := envDuration(b, envFanoutIdle, 30*time.Second)
	bin := buildControllerBinaries(b, b.TempDir()).controller
	b.ResetTimer()
	for range b.N {
		runFanoutBench(b, bin, namespaces, unrelated, idle)
	}
}

func runFanoutBench(b *testing.B, bin string, namespaces, unrelated int, idle time.Duration) {
	b.StopTimer()
	r := startFanoutRun(b, namespaces)
	first := max(1, unrelated/5)
	t := time.Now()
	r.addUnrelated(b, first)
	b.Logf("setup: %d unrelated Secrets created in %.0f s", first, time.Since(t).Seconds())
	r.ctrl = r.startController(b, bin)
	r.waitQuiet(b, "the controller's start")

	b.StartTimer()
	start := time.Now()
	src := r.createSource(b)
	r.waitCopies(b, "every copy", src.ResourceVersion, false)
	copies := time.Since(start)
	profile := r.ctrl.startCPUProfile(b, os.Getenv(envCPUProfile))
	ctrl0, plane0 := r.cpu(b), controlPlaneCPU(b, r.dir)
	start = time.Now()
	src = r.changeSource(b)
	r.waitCopies(b, "the source's change in every copy", src.ResourceVersion, true)
	change := time.Since(start)
	changeCPU, planeCPU := r.cpu(b)-ctrl0, controlPlaneCPU(b, r.dir)-plane0
	b.StopTimer()
	profile()
	newNS := r.newNamespaces(b, newNamespaceRounds)

	r.waitQuiet(b, "the copies written")
	idleCPU := r.cpuOver(b, idle)
	rss10 := procMiB(b, r.ctrl.proc.Pid(), "VmRSS")
	r.logRSS(b, "first reading")
	c0 := r.cpu(b)
	t0 := time.Now()
	r.updateUnrelated(b, first)
	r.waitQuiet(b, "the unrelated Secrets updated")
	updateCPU, updateWall := r.cpu(b)-c0, time.Since(t0)

	t = time.Now()
	r.addUnrelated(b, unrelated)
	b.Logf("setup: %d more unrelated Secrets created in %.0f s", unrelated-first, time.Since(t).Seconds())
	r.waitQuiet(b, "the unrelated Secrets created")
	idleCPU2 := r.cpuOver(b, idle)
	rss50 := procMiB(b, r.ctrl.proc.Pid(), "VmRSS")
	hwm := procMiB(b, r.ctrl.proc.Pid(), "VmHWM")
	anon, file := procMiB(b, r.ctrl.proc.Pid(), "RssAnon"), procMiB(b, r.ctrl.proc.Pid(), "RssFile")
	r.logRSS(b, "second reading")
	r.ctrl.writeHeapProfile(b, os.Getenv(envHeapProfile))
	if n := len(r.copies(b).Items); n != r.namespaces {
		b.Errorf("%d copies at the end, want %d", n, r.namespaces)
	}

	b.ReportMetric(copies.Seconds(), "copies-s")
	b.ReportMetric(change.Seconds(), "change-s")
	b.ReportMetric(changeCPU, "change-cpu-s")
	b.ReportMetric(percentile(newNS, 50).Seconds(), "new-namespace-s")
	b.ReportMetric(percentile(newNS, 100).Seconds(), "new-namespace-max-s")
	b.ReportMetric(planeCPU, "change-apiserver-cpu-s")
	b.ReportMetric(idleCPU, "idle-cpu-s")
	b.ReportMetric(updateCPU, "unrelated-update-cpu-s")
	b.ReportMetric(rss10, "rss-10k-mib")
	b.ReportMetric(rss50, "rss-50k-mib")
	b.ReportMetric(rss50-rss10, "rss-growth-mib")
	b.ReportMetric(hwm, "hwm-mib")
	b.ReportMetric(anon, "rss-50k-anon-mib")
	b.ReportMetric(file, "rss-50k-file-mib")
	b.Logf("%d namespaces, %d then %d unrelated Secrets:", namespaces, first, unrelated)
	b.Logf("  copies-s               %8.1f", copies.Seconds())
	b.Logf("  change-s               %8.1f   keymount-controller %.2f CPU-s, kube-apiserver + etcd %.2f CPU-s meanwhile", change.Seconds(), changeCPU, planeCPU)
	b.Logf("  new-namespace-s        %8.3f   median of %d namespaces created one by one (slowest %.3f)", percentile(newNS, 50).Seconds(), len(newNS), percentile(newNS, 100).Seconds())
	b.Logf("  idle-cpu-s             %8.2f   over %s at %d unrelated (%.2f at %d); target ~0", idleCPU, idle, first, idleCPU2, unrelated)
	b.Logf("  unrelated-update-cpu-s %8.2f   %d Secrets updated in %.1f s", updateCPU, first, updateWall.Seconds())
	b.Logf("  rss-10k-mib            %8.1f   at %d unrelated; target <= 64", rss10, first)
	b.Logf("  rss-50k-mib            %8.1f   at %d unrelated; target <= 64", rss50, unrelated)
	b.Logf("  rss-growth-mib         %8.1f   target <= 2", rss50-rss10)
	b.Logf("  hwm-mib                %8.1f", hwm)
}

// startFanoutRun starts the control plane with the source's namespace and
// the fo-NNNN namespaces.
func startFanoutRun(b *testing.B, namespaces int) *fanoutRun {
	b.Helper()
	r := &fanoutRun{namespaces: namespaces, spread: namespaces, dir: b.TempDir()}
	// Own control plane: the benchmark measures the CPU time of the control plane's processes (found by Options.Dir), only its own work.
	r.env = k8senv.Start(b, k8senv.Options{Dir: r.dir, CRDDirectoryPaths: []string{"../../deploy/crds"}})
	kubeconfig, cfg := r.env.KubeconfigFor(b, "keymount-bench-controller", []string{"system:masters"})
	r.kubeconfig = kubeconfig
	cfg.QPS, cfg.Burst = 1000, 2000
	r.cs = kubernetes.NewForConfigOrDie(cfg)
	r.meta = metadata.NewForConfigOrDie(cfg)
	names := append([]string{fanoutSourceNS, controllerNS}, make([]string, namespaces)...)
	for i := range namespaces {
		names[2+i] = fanoutNamespace(i)
	}
	err := parallel(len(names), fanoutWorkers, func(i int) error {
		_, err := r.cs.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("create %d namespaces: %v", len(names), err)
	}
	return r
}

// newNamespaceRounds is how many namespaces BenchmarkFanout creates one
// by one after the source change, timing each until its copy exists.
const newNamespaceRounds = 5

// newNamespaces creates n more matching namespaces, one at a time, and
// returns, for each, the time from its create call to its copy being
// seen on a watch.
func (r *fanoutRun) newNamespaces(b *testing.B, n int) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, n)
	for range n {
		ns := fanoutNamespace(r.namespaces)
		copies := r.meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns)
		sel := metav1.ListOptions{LabelSelector: fanout.LabelCopy + "=" + reflector.WriterName}
		start := time.Now()
		created, err := r.cs.CoreV1().Namespaces().Create(b.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatalf("create namespace %s: %v", ns, err)
		}
		sel.ResourceVersion = created.ResourceVersion
		w, err := copies.Watch(b.Context(), sel)
		if err != nil {
			b.Fatalf("watch copies in %s: %v", ns, err)
		}
		r.namespaces++
		r.waitEvent(b, w, "the copy in new namespace "+ns)
		out = append(out, time.Since(start))
	}
	return out
}

// waitEvent waits for w's first added object (a copy), and stops w.
func (r *fanoutRun) waitEvent(b *testing.B, w watch.Interface, what string) {
	b.Helper()
	defer w.Stop()
	deadline := time.After(stallTimeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("%s: the watch ended", what)
			}
			if ev.Type == watch.Added {
				return
			}
		case <-deadline:
			b.Fatalf("%s: none after %s\n%s", what, stallTimeout, r.ctrl.logTail())
		case <-r.ctrl.proc.Exited():
			b.Fatalf("%s: %v\n%s", what, r.exited(), r.ctrl.logTail())
		}
	}
}

// fanoutNamespace is the i-th namespace the source is copied into.
func fanoutNamespace(i int) string { return fmt.Sprintf("fo-%04d", i) }

// startController starts keymount-controller with --enable-fanout, an
// administrator's kubeconfig, no provider, and the shipped Deployment's
// memory settings; it stops it when the run ends.
func (r *fanoutRun) startController(b *testing.B, bin string) *controllerProc {
	b.Helper()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(b))
	args := []string{
		"--kubeconfig=" + r.kubeconfig, "--namespace=" + controllerNS, "--provider-volume=" + socketDir(b),
		"--enable-fanout", "--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0", "--leader-elect=false",
	}
	env := memoryEnv(b, controllerContainer(b))
	var pprofAddr string
	if os.Getenv(envHeapProfile) != "" || os.Getenv(envCPUProfile) != "" {
		pprofAddr = "127.0.0.1:" + strconv.Itoa(freePort(b))
		args = append(args, "--pprof-bind-address="+pprofAddr)
		env = append(env, "GODEBUG=memprofilerate=4096")
	}
	c, err := startChild("keymount-controller", filepath.Join(r.dir, "controller.log"), bin, env, args...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.stop(); err != nil {
			b.Errorf("stop keymount-controller: %v", err)
		}
	})
	p := &controllerProc{child: c, metricsURL: "http://" + metricsAddr + "/metrics", pprofAddr: pprofAddr}
	p.waitSyncs(b, "the controller's metrics", func(syncCounts) bool { return true })
	return p
}

// fanoutData is a TLS Secret's data: a certificate chain and a key's size.
func fanoutData() map[string][]byte {
	return map[string][]byte{corev1.TLSCertKey: randomHexBytes(3000), corev1.TLSPrivateKeyKey: randomHexBytes(1700)}
}

// createSource creates the source TLS Secret with reflector's annotations.
func (r *fanoutRun) createSource(b *testing.B) *corev1.Secret {
	b.Helper()
	s, err := r.cs.CoreV1().Secrets(fanoutSourceNS).Create(b.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fanoutSource, Annotations: map[string]string{
			reflector.AnnotationAllowed: "true", reflector.AnnotationAllowedNamespaces: fanoutPattern,
			reflector.AnnotationAutoEnabled: "true", reflector.AnnotationAutoNamespaces: fanoutPattern,
		}},
		Type: corev1.SecretTypeTLS, Data: fanoutData(),
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("create the source: %v", err)
	}
	return s
}

// changeSource gives the source new data (a renewed certificate).
func (r *fanoutRun) changeSource(b *testing.B) *corev1.Secret {
	b.Helper()
	s, err := r.cs.CoreV1().Secrets(fanoutSourceNS).Get(b.Context(), fanoutSource, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s.Data = fanoutData()
	if s, err = r.cs.CoreV1().Secrets(fanoutSourceNS).Update(b.Context(), s, metav1.UpdateOptions{}); err != nil {
		b.Fatalf("change the source: %v", err)
	}
	return s
}

// copies lists the copies keymount's reflector writer wrote, by label.
func (r *fanoutRun) copies(b *testing.B) *metav1.PartialObjectMetadataList {
	b.Helper()
	list, err := r.meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).List(b.Context(),
		metav1.ListOptions{LabelSelector: fanout.LabelCopy + "=" + reflector.WriterName})
	if err != nil {
		b.Fatalf("list the copies: %v", err)
	}
	return list
}

// waitCopies waits until every namespace holds a copy; with exact, one
// whose reflected-version is version. It lists the copies once, then
// watches them (a list every 100 ms would cost the API server, which the
// controller's writes need, more than the watch).
func (r *fanoutRun) waitCopies(b *testing.B, what, version string, exact bool) {
	b.Helper()
	done := map[string]bool{}
	counts := func(m *metav1.PartialObjectMetadata) bool {
		return !exact || m.Annotations[reflector.AnnotationReflectedVersion] == version
	}
	deadline := time.After(stallTimeout)
	for {
		list := r.copies(b)
		clear(done)
		for i := range list.Items {
			if counts(&list.Items[i]) {
				done[list.Items[i].Namespace] = true
			}
		}
		if len(done) >= r.namespaces {
			return
		}
		w, err := r.meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Watch(b.Context(), metav1.ListOptions{
			LabelSelector: fanout.LabelCopy + "=" + reflector.WriterName, ResourceVersion: list.ResourceVersion,
		})
		if err != nil {
			b.Fatalf("watch the copies: %v", err)
		}
		for open := true; open && len(done) < r.namespaces; {
			select {
			case ev, ok := <-w.ResultChan():
				m, isMeta := ev.Object.(*metav1.PartialObjectMetadata)
				switch {
				case !ok:
					open = false // watch ended: list again
				case !isMeta:
				case ev.Type != watch.Deleted && counts(m):
					done[m.Namespace] = true
				default:
					delete(done, m.Namespace)
				}
			case <-deadline:
				w.Stop()
				b.Fatalf("%s: %d of %d after %s\n%s", what, len(done), r.namespaces, stallTimeout, r.ctrl.logTail())
			case <-r.ctrl.proc.Exited():
				w.Stop()
				b.Fatalf("%s: %v\n%s", what, r.exited(), r.ctrl.logTail())
			}
		}
		w.Stop()
		if len(done) >= r.namespaces {
			return
		}
	}
}

// exited is an error once the controller has exited.
func (r *fanoutRun) exited() error {
	select {
	case <-r.ctrl.proc.Exited():
		return fmt.Errorf("keymount-controller exited: %w", r.ctrl.exitErr())
	default:
		return nil
	}
}

// logRSS logs where the controller's resident pages are: the heap and
// runtime (anonymous) and the binary's own pages (file-backed).
func (r *fanoutRun) logRSS(b *testing.B, what string) {
	b.Helper()
	pid := r.ctrl.proc.Pid()
	b.Logf("%s: VmRSS %.1f MiB = anonymous %.1f + file-backed %.1f (+ shmem)", what,
		procMiB(b, pid, "VmRSS"), procMiB(b, pid, "RssAnon"), procMiB(b, pid, "RssFile"))
}

// cpu is the controller's CPU time so far.
func (r *fanoutRun) cpu(b *testing.B) float64 {
	b.Helper()
	s, err := cpuSeconds(r.ctrl.proc.Pid())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// cpuOver is the controller's CPU time over a measurement window of d.
func (r *fanoutRun) cpuOver(b *testing.B, d time.Duration) float64 {
	b.Helper()
	c0 := r.cpu(b)
	select {
	case <-time.After(d):
	case <-b.Context().Done():
		b.Fatal(b.Context().Err())
	}
	return r.cpu(b) - c0
}

// waitQuiet waits until the controller has used less than quietCPU over
// quietWindow: done with the events it was given.
func (r *fanoutRun) waitQuiet(b *testing.B, what string) {
	b.Helper()
	last := r.cpu(b)
	err := wait.PollUntilContextTimeout(b.Context(), quietWindow, stallTimeout, false, func(context.Context) (bool, error) {
		now := r.cpu(b)
		quiet := now-last < quietCPU
		last = now
		return quiet, r.exited()
	})
	if err != nil {
		b.Fatalf("the controller busy for %s after %s: %v\n%s", stallTimeout, what, err, r.ctrl.logTail())
	}
}

// unrelatedName is the i-th unrelated Secret, in namespace fo-(i mod n).
func (r *fanoutRun) unrelatedName(i int) (namespace, name string) {
	return fanoutNamespace(i % r.spread), fmt.Sprintf("other-%05d", i)
}

// addUnrelated creates unrelated Secrets (TLS-sized, no annotations, no
// label) until there are total.
func (r *fanoutRun) addUnrelated(b *testing.B, total int) {
	b.Helper()
	from := r.unrelated
	err := parallel(total-from, fanoutWorkers, func(i int) error {
		ns, name := r.unrelatedName(from + i)
		_, err := r.cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: fanoutData(),
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("create %d unrelated Secrets: %v", total-from, err)
	}
	r.unrelated = total
}

// updateUnrelated gives the first n unrelated Secrets new data.
func (r *fanoutRun) updateUnrelated(b *testing.B, n int) {
	b.Helper()
	err := parallel(n, fanoutWorkers, func(i int) error {
		ns, name := r.unrelatedName(i)
		_, err := r.cs.CoreV1().Secrets(ns).Update(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: fanoutData(),
		}, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("update %d unrelated Secrets: %v", n, err)
	}
}
