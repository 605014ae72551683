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
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/k8senv"
)

// The controller benchmark runs the real keymount-controller binary against
// a real kube-apiserver (and etcd) with real provider binaries on unix
// sockets in its --provider-volume: SecretSyncs of one service account over
// ctrlClasses classes, each class one distinct object of ctrlObjectSize
// bytes, SecretSync i on class i mod ctrlClasses.

// Scale of the controller benchmark; the environment scales it down for a
// quick run.
const (
	// envSecretSyncs is the number of SecretSyncs (default 10,000).
	envSecretSyncs = "KEYMOUNT_BENCH_SECRETSYNCS"
	// envUnrelated is the number of unrelated Secrets added before the
	// last RSS reading (default: as many as SecretSyncs).
	envUnrelated = "KEYMOUNT_BENCH_UNRELATED_SECRETS"
	// envPollInterval is the controller's --rotation-poll-interval
	// (default 1m): how often every SecretSync is refreshed.
	envPollInterval = "KEYMOUNT_BENCH_POLL_INTERVAL"
	// envHeapProfile, when set, is a file the benchmark writes the
	// controller's heap profile to (go tool pprof) after the RSS reading
	// with 10,000 SecretSyncs: where the memory goes.
	envHeapProfile = "KEYMOUNT_BENCH_HEAP_PROFILE"
	// envCPUProfile, when set, is a file BenchmarkFanout writes the
	// controller's CPU profile of the source change to.
	envCPUProfile = "KEYMOUNT_BENCH_CPU_PROFILE"
	// envRounds is the number of steady-state rounds measured (default
	// 5): their figures are averaged per round.
	envRounds = "KEYMOUNT_BENCH_ROUNDS"
)

const (
	defaultSecretSyncs = 10000
	// defaultRounds steady-state rounds at the default poll interval span
	// the AWS provider's default MaxListedAge (5m): the round in which its
	// values are read directly again, not only revalidated by ListSecrets,
	// is averaged with the others.
	defaultRounds = 5
	// ctrlClasses is the most classes (one distinct object each).
	ctrlClasses = 100
	// ctrlObjectSize is the size of every object: a credential or a
	// small JSON document.
	ctrlObjectSize = 1 << 10
	// Namespaces of the benchmark.
	syncNamespace      = "bench"
	controllerNS       = "keymount-system"
	unrelatedNamespace = "unrelated"
	// syncServiceAccount is the one service account of every SecretSync.
	syncServiceAccount = "bench-app"
	// awsRoleARN is the IRSA role of the service account (moto accepts any).
	awsRoleARN = "arn:aws:iam::123456789012:role/bench"
	// stsAudience is the audience of the IRSA token.
	stsAudience = "sts.amazonaws.com"
)

// ctrlScale is the size of one run.
type ctrlScale struct {
	syncs, classes, unrelated, rounds int
	poll                              time.Duration
}

// BenchmarkController measures keymount-controller (issue 20, point 8) with
// $KEYMOUNT_BENCH_SECRETSYNCS SecretSyncs (10,000 unless set), one service
// account, 100 classes of one distinct object each, against the local
// provider and against the AWS provider on moto_server:
//
//   - secrets-created-s: from the first SecretSync created to the last
//     Secret created by the controller;
//   - round-api-writes: Secrets and SecretSyncs whose resourceVersion moved
//     while every SecretSync was refreshed $KEYMOUNT_BENCH_ROUNDS times
//     (5 unless set) with nothing changed in the store
//     (--rotation-poll-interval; target 0), all those rounds together;
//   - round-cpu-s, round-s: the controller's CPU time (utime+stime) and the
//     wall time of a round, scaled to exactly one refresh per SecretSync,
//     averaged over those rounds;
//   - store-calls/round (aws): requests to Secrets Manager per round, for
//     one identity and 100 distinct objects (target ≤ 3), averaged over
//     those rounds: the AWS provider revalidates its cached values with
//     ListSecrets and reads them again every 5 minutes (its MaxListedAge),
//     so a single round would count that read or miss it;
//   - rss-mib, hwm-mib: the controller's VmRSS after the round and VmHWM at
//     the end (target ≤ 100 MiB at 10,000);
//   - rss-unrelated-mib: VmRSS after $KEYMOUNT_BENCH_UNRELATED_SECRETS
//     Secrets (as many as SecretSyncs unless set) without the label were
//     created and one more round passed (target: rss-mib; the controller
//     watches only its labelled Secrets).
//
// One op is the whole scenario: run it with -benchtime 1x.
func BenchmarkController(b *testing.B) {
	syncs := envInt(b, envSecretSyncs, defaultSecretSyncs)
	sc := ctrlScale{
		syncs: syncs, classes: min(ctrlClasses, syncs), unrelated: envInt(b, envUnrelated, syncs),
		poll: envDuration(b, envPollInterval, time.Minute), rounds: max(1, envInt(b, envRounds, defaultRounds)),
	}
	bins := buildControllerBinaries(b, b.TempDir())
	for _, provider := range []string{"local", "aws"} {
		b.Run("provider="+provider, func(b *testing.B) {
			for range b.N {
				runControllerBench(b, bins, sc, provider)
			}
		})
	}
}

// ctrlRun is one run of the controller benchmark.
type ctrlRun struct {
	sc      ctrlScale
	env     *k8senv.Env
	cl      client.Client
	dir     string
	sockets string
	// kubeconfig is an administrator's, for the controller and providers.
	kubeconfig string
	provider   string
	counter    *storeCounter
}

func runControllerBench(b *testing.B, bins controllerBinaries, sc ctrlScale, provider string) {
	b.StopTimer()
	r := startCtrlRun(b, sc, provider)
	switch provider {
	case "local":
		r.startLocal(b, bins.local)
	case "aws":
		r.startAWS(b, bins.aws)
	}
	r.createClasses(b)
	c := r.startController(b, bins.controller)

	b.StartTimer()
	start := time.Now()
	r.createSyncs(b)
	c.waitSyncs(b, "create the Secrets", func(s syncCounts) bool { return s["created"] >= float64(sc.syncs) })
	created := time.Since(start)
	b.StopTimer()
	b.ReportMetric(created.Seconds(), "secrets-created-s")
	if n := r.count(b, "SecretList", true); n != sc.syncs {
		b.Fatalf("%d labelled Secrets in %s, want %d", n, syncNamespace, sc.syncs)
	}

	var createCalls int64
	if r.counter != nil {
		createCalls = r.counter.store.Load()
		b.ReportMetric(float64(createCalls), "store-calls-create")
	}

	// The first refresh after the creation, then one in the steady state.
	first := r.refreshRound(b, c)
	b.ReportMetric(float64(first.writes()), "first-round-api-writes")
	round := r.refreshRounds(b, c, sc.rounds)
	b.ReportMetric(float64(round.writes()), "round-api-writes")
	b.ReportMetric(round.cpu, "round-cpu-s")
	b.ReportMetric(round.wall, "round-s")
	if r.counter != nil {
		b.ReportMetric(round.store, "store-calls/round")
		b.ReportMetric(round.sts, "sts-calls/round")
	}
	rss := procMiB(b, c.proc.Pid(), "VmRSS")
	b.ReportMetric(rss, "rss-mib")
	// Where the pages are: the heap and runtime (anonymous) and the
	// binary's own pages (file-backed).
	rssAnon, rssFile := procMiB(b, c.proc.Pid(), "RssAnon"), procMiB(b, c.proc.Pid(), "RssFile")
	b.ReportMetric(rssAnon, "rss-anon-mib")
	b.ReportMetric(rssFile, "rss-file-mib")
	c.writeHeapProfile(b, os.Getenv(envHeapProfile))

	r.createUnrelated(b)
	r.refreshRound(b, c)
	rssUnrelated := procMiB(b, c.proc.Pid(), "VmRSS")
	hwm := procMiB(b, c.proc.Pid(), "VmHWM")
	b.ReportMetric(rssUnrelated, "rss-unrelated-mib")
	b.ReportMetric(hwm, "hwm-mib")

	b.Logf("provider=%s, %d SecretSyncs, %d classes, %d unrelated Secrets, --rotation-poll-interval=%s, %d rounds averaged:", provider, sc.syncs, sc.classes, sc.unrelated, sc.poll, sc.rounds)
	b.Logf("  secrets-created-s      %8.1f", created.Seconds())
	if r.counter != nil {
		b.Logf("  store-calls-create     %8d", createCalls)
	}
	b.Logf("  first-round-api-writes %8d   (%s)", first.writes(), first)
	b.Logf("  round-api-writes       %8d   target 0 (%s)", round.writes(), round)
	b.Logf("  round-cpu-s            %8.2f   (%d refreshes seen in %d rounds, scaled to %d a round)", round.cpu, round.refreshes, sc.rounds, sc.syncs)
	b.Logf("  round-s                %8.1f", round.wall)
	if r.counter != nil {
		b.Logf("  store-calls/round      %8.1f   target <= 3 (one identity, %d distinct objects)", round.store, sc.classes)
		b.Logf("  sts-calls/round        %8.1f", round.sts)
	}
	b.Logf("  rss-mib                %8.1f   target <= 100 (anonymous %.1f, file-backed %.1f)", rss, rssAnon, rssFile)
	b.Logf("  rss-unrelated-mib      %8.1f   target: flat (rss-mib)", rssUnrelated)
	b.Logf("  hwm-mib                %8.1f", hwm)
	if round.writes() != 0 {
		b.Errorf("a refresh round with nothing changed wrote %d Secrets and %d SecretSyncs, want none", round.secretWrites, round.syncWrites)
	}
}

// startCtrlRun starts the control plane with keymount's CRDs, the
// namespaces and the service account.
func startCtrlRun(b *testing.B, sc ctrlScale, provider string) *ctrlRun {
	b.Helper()
	r := &ctrlRun{sc: sc, provider: provider, dir: b.TempDir(), sockets: socketDir(b)}
	// Own control plane: a benchmark measures against a control plane loaded by nothing else.
	r.env = k8senv.Start(b, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}})
	kubeconfig, cfg := r.env.KubeconfigFor(b, "keymount-bench-controller", []string{"system:masters"})
	r.kubeconfig = kubeconfig
	scheme, err := kube.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	if r.cl, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{syncNamespace, controllerNS, unrelatedNamespace} {
		r.create(b, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: syncServiceAccount}}
	if provider == "aws" {
		sa.Annotations = map[string]string{"eks.amazonaws.com/role-arn": awsRoleARN}
	}
	r.create(b, sa)
	return r
}

func (r *ctrlRun) create(b *testing.B, o client.Object) {
	b.Helper()
	if err := r.cl.Create(b.Context(), o); err != nil {
		b.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// objectName is the name of class i's one object.
func objectName(i int) string { return fmt.Sprintf("obj-%02d", i) }

// startLocal writes the objects and starts keymount-provider-local.
func (r *ctrlRun) startLocal(b *testing.B, bin string) {
	b.Helper()
	root := filepath.Join(r.dir, "root")
	if err := os.MkdirAll(root, 0o700); err != nil {
		b.Fatal(err)
	}
	for i := range r.sc.classes {
		if err := os.WriteFile(filepath.Join(root, objectName(i)), randomHexBytes(ctrlObjectSize), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	startProvider(b, "keymount-provider-local", filepath.Join(r.dir, "provider-local.log"), bin,
		filepath.Join(r.sockets, "local.sock"), nil, "--root="+root, "--provider-dir="+r.sockets, "--name=local")
}

// classParameters are class i's parameters for the run's provider.
func (r *ctrlRun) classParameters(i int) map[string]string {
	if r.provider == "aws" {
		return map[string]string{"region": motoRegion, "objects": "- objectName: bench/" + objectName(i) +
			"\n  objectType: secretsmanager\n  objectAlias: " + objectName(i) + "\n"}
	}
	return map[string]string{"objects": "- objectName: " + objectName(i) + "\n"}
}

// createClasses creates the classes, class-NN naming objectName(NN).
func (r *ctrlRun) createClasses(b *testing.B) {
	b.Helper()
	for i := range r.sc.classes {
		r.create(b, &secretsstorev1.SecretProviderClass{
			ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: fmt.Sprintf("class-%02d", i)},
			Spec: secretsstorev1.SecretProviderClassSpec{
				Provider: secretsstorev1.Provider(r.provider), Parameters: r.classParameters(i),
			},
		})
	}
}

// startController starts keymount-controller with an administrator's
// kubeconfig (the chart's RBAC is not what is measured), the run's poll
// interval and metrics on a loopback port, and stops it when the run ends.
func (r *ctrlRun) startController(b *testing.B, bin string) *controllerProc {
	b.Helper()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(b))
	args := []string{
		"--kubeconfig=" + r.kubeconfig, "--namespace=" + controllerNS, "--provider-volume=" + r.sockets,
		"--rotation-poll-interval=" + r.sc.poll.String(), "--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=0", "--leader-elect=false",
	}
	if r.provider == "aws" {
		args = append(args, "--token-request-audience="+stsAudience)
	}
	var pprofAddr string
	if os.Getenv(envHeapProfile) != "" {
		pprofAddr = "127.0.0.1:" + strconv.Itoa(freePort(b))
		args = append(args, "--pprof-bind-address="+pprofAddr)
	}
	// The Go runtime's memory settings the shipped Deployment gives it.
	env := memoryEnv(b, controllerContainer(b))
	if pprofAddr != "" {
		// Sample an allocation every 4 KiB, not 512: a profile that
		// attributes every object type.
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

// createSyncs creates the SecretSyncs, sync-NNNNN on class NNNNN mod
// classes, 16 at a time.
func (r *ctrlRun) createSyncs(b *testing.B) {
	b.Helper()
	err := parallel(r.sc.syncs, 16, func(i int) error {
		c := i % r.sc.classes
		return r.cl.Create(context.Background(), &ss1.SecretSync{
			ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: fmt.Sprintf("sync-%05d", i)},
			Spec: ss1.SecretSyncSpec{
				SecretProviderClassName: fmt.Sprintf("class-%02d", c),
				ServiceAccountName:      syncServiceAccount,
				SecretObject: ss1.SecretObject{
					Type: string(corev1.SecretTypeOpaque),
					Data: []ss1.SecretObjectData{{SourcePath: objectName(c), TargetKey: "value"}},
				},
			},
		})
	})
	if err != nil {
		b.Fatalf("create %d SecretSyncs: %v", r.sc.syncs, err)
	}
}

// createUnrelated creates the unrelated Secrets, without the controller's
// label, in their own namespace.
func (r *ctrlRun) createUnrelated(b *testing.B) {
	b.Helper()
	err := parallel(r.sc.unrelated, 16, func(i int) error {
		return r.cl.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: unrelatedNamespace, Name: fmt.Sprintf("other-%05d", i)},
			Data:       map[string][]byte{"value": randomHexBytes(ctrlObjectSize)},
		})
	})
	if err != nil {
		b.Fatalf("create %d unrelated Secrets: %v", r.sc.unrelated, err)
	}
}

// randomHexBytes is n random hexadecimal characters.
func randomHexBytes(n int) []byte {
	const digits = "0123456789abcdef"
	raw := randomBytes(n)
	for i, c := range raw {
		raw[i] = digits[c&0xf]
	}
	return raw
}
